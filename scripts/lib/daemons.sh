# Daemons of scripts/cluster.sh and scripts/kubelet-node.sh: each started in its own
# session with its output in DIR/logs/NAME.log and its pid in DIR/pids; waits that fail
# as soon as one of them exits. Sourced; the caller defines die and sets DIR.

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start NAME ARGS...: a daemon.
start() {
  local name=$1
  shift
  setsid "$@" >"$DIR/logs/$name.log" 2>&1 </dev/null &
  echo "$name $!" >>"$DIR/pids"
}

# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
  local what=$1 limit=$2 i
  shift 2
  for ((i = 0; i < limit * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    check_alive
    sleep 0.2
  done
  die "$what did not come up within ${limit}s (logs in $DIR/logs)"
}

# check_alive fails naming the first daemon that exited, with its log's tail.
check_alive() {
  local name pid
  while read -r name pid; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 15 "$DIR/logs/$name.log" >&2 || true
      die "$name exited (log: $DIR/logs/$name.log)"
    fi
  done <"$DIR/pids"
}
