# cmd/bench/ports.sh: free_port, for the scripts of cmd/bench/ (sourced, not run).

# free_port prints a port on 127.0.0.1 that nothing listens on, below the
# kernel's ephemeral range (where outgoing connections take their local
# ports, so a free-looking port there may not bind), never 6379.
free_port() {
  local p lo
  lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  for _ in $(seq 1 50); do
    p=$(( (RANDOM % (lo - 20000)) + 20000 ))
    [ "$p" = 6379 ] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  echo "bench: no free port" >&2
  return 1
}
