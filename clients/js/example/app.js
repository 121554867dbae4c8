// The example: a friend list with live dots and a "N watching" counter,
// using only presence.js.
import { Presence } from "./presence.js";

const q = new URLSearchParams(location.search);
const user = q.get("user") || "alice";
const friends = (q.has("friends") ? q.get("friends") : "bob,carol,dave").split(",").filter(Boolean);
const [cls, id] = (q.get("scope") || "video:10086").split(":");
const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
const $ = (s) => document.querySelector(s);

const presence = new Presence({ user, token });
const me = (state, text) => { $("#me").dataset.state = state; $("#me").textContent = `${user}: ${text}`; };
presence.on("leader", (on) => me("on", on ? "online, this tab beats for the browser" : "online, another tab beats"));
presence.on("kicked", () => me("kicked", "signed in elsewhere: this session ended"));
presence.on("logout", () => me("logout", "logged out"));
presence.start().then(() => presence.running && me("on", presence.leader ? "online, this tab beats for the browser" : "online, another tab beats"));

// The test harness reads what the page saw.
const seen = [];
const follow = presence.follow(friends, (u, status) => {
  seen.push([u, status]);
  row(u).querySelector(".dot").dataset.status = status;
});
const watch = presence.watch(cls, id, (n) => { $("#watching").textContent = n; }, { every: Number(q.get("count_every")) || undefined });
// A follow the server refuses (the token may not read one of the users)
// shows why, rather than dots that stay grey.
presence.on("refused", (e) => {
  const p = $("#follow-error");
  p.textContent = `Cannot follow: ${e.message} (HTTP ${e.status}). Sign in with a token that may read them (presence serve token --follow ${friends.join(",")}).`;
  p.hidden = false;
  for (const d of document.querySelectorAll("#friends .dot")) d.dataset.status = "REFUSED";
});

// The manual status: set here, kept by the client, set again after a loss.
const showManual = () => {
  const m = presence.manual;
  $("#manual").textContent = m ? m.status + (m.until ? " until " + new Date(m.until).toLocaleTimeString() : "") : "none";
};
$("#dnd").onclick = () => presence.setManual("DND").then(showManual, (e) => { $("#manual").textContent = "refused: " + e.message; });
$("#clear").onclick = () => presence.clearManual().then(showManual, (e) => { $("#manual").textContent = "refused: " + e.message; });
presence.on("reasserted", showManual);
showManual();
$("#scope").textContent = id;
Object.assign(globalThis, { presence, follow, watch, seen });

function row(u) {
  let li = document.querySelector(`#friends li[data-user="${CSS.escape(u)}"]`);
  if (!li) {
    li = document.createElement("li");
    li.dataset.user = u;
    const dot = document.createElement("span"), name = document.createElement("span"), rm = document.createElement("button");
    dot.className = "dot";
    dot.dataset.status = "OFFLINE";
    name.textContent = u;
    rm.textContent = "unfollow";
    rm.onclick = () => { follow.remove(u); li.remove(); };
    li.append(dot, name, rm);
    $("#friends").append(li);
  }
  return li;
}
friends.forEach(row);
$("#add").onsubmit = (e) => {
  e.preventDefault();
  const u = $("#friend").value.trim();
  if (u) { row(u); follow.add(u); }
  $("#friend").value = "";
};
$("#logout").onclick = () => presence.logout();
