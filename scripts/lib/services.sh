# Process helpers for the benchmark scripts that start services in the background. Source it
# after setting $out (logs go to $out/logs/). The caller appends long-lived PIDs to `pids`;
# stop_all (installed as the EXIT trap) stops them newest first.

pids=()
stop_pid() {  # stop_pid PID: SIGTERM, then wait for it
  kill -TERM "$1" 2> /dev/null || true
  wait "$1" 2> /dev/null || true
}
stop_all() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop_pid "${pids[i]}"; done
  pids=()
}
trap 'stop_all' EXIT
trap 'exit 130' INT TERM

# start NAME CMD...: runs it in the background (log in $out/logs/NAME.log), waits for its
# "listening on HOST:PORT" line (at most 120 s) and sets $started_pid and $started_addr.
start() {
  local name="$1"
  shift
  local log="$out/logs/$name.log"
  "$@" > "$log" 2>&1 &
  started_pid=$!
  for _ in $(seq 1 1200); do
    if grep -q "listening on" "$log" 2> /dev/null; then
      started_addr="$(grep -m1 'listening on' "$log" | sed 's/.*listening on \([^ ]*\).*/\1/')"
      echo "   $name: $started_addr (pid $started_pid)"
      return 0
    fi
    kill -0 "$started_pid" 2> /dev/null || break
    sleep 0.1
  done
  echo "$name failed to start:" >&2
  cat "$log" >&2
  stop_pid "$started_pid"
  return 1
}
