// path.mjs: the two path helpers main.mjs needs, from Node's path and url
// modules (which Deno provides), so that the example needs no remote
// import.
import path from "node:path";
import { pathToFileURL } from "node:url";

// resolve makes p absolute against the working directory.
export const resolve = (p) => path.resolve(p);

// toFileUrl is the file: URL of an absolute path, as text.
export const toFileUrl = (p) => pathToFileURL(p).href;
