#!/usr/bin/env bash
# A fleet on one machine, as plain processes: redis-server, PostgreSQL,
# two idn gateways (replicas a and b) keeping their nonces in Redis and
# their connections, secrets and identity in PostgreSQL, and HAProxy in
# front (haproxy.cfg), which sends an MCP session to the replica its id
# names. No root needed; Debian's redis-server, haproxy and postgresql
# must be installed. e2e/fleet runs it; docs/gateway.md ("Running a
# fleet") tells the shape.
#
#   fleet.sh start DIR           start everything; return once the fleet serves
#   fleet.sh restart DIR a|b     stop a replica (SIGTERM, it drains), start it again
#   fleet.sh rolling DIR         restart a, then b, each back in rotation first
#   fleet.sh kill DIR a|b        SIGKILL a replica (a crash)
#   fleet.sh start-one DIR a|b   start one replica again (after kill)
#   fleet.sh redis-stop DIR      stop Redis (fault drills); redis-start starts it
#   fleet.sh stop DIR            stop everything
#
# DIR holds each process's files: a/ and b/ (the gateways' data), redis/,
# pg/ (see pg_data), *.pid, *.log, and database.url, the URL the gateways share (for
# `gateway add` and the like). With GATEWAY_DATABASE_URL set, the
# gateways use that database; otherwise the script starts a throwaway
# PostgreSQL in pg/. The gateways read GATEWAY_MASTER_KEY (the same for both),
# IDN_REGISTRY_URL and any other GATEWAY_* or IDN_* setting from the
# environment. GATEWAY_BIN names the gateway binary (default: gateway on
# PATH). Ports: FLEET_LB_PORT (38100), FLEET_GATEWAY_A_PORT (38101),
# FLEET_GATEWAY_B_PORT (38102), FLEET_REDIS_PORT (6380),
# FLEET_PG_PORT (38103), FLEET_STATS_PORT (38109, HAProxy's CSV status).
set -euo pipefail
PATH=$PATH:/usr/sbin:/sbin # where Debian puts haproxy, outside a user's PATH
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:?usage: fleet.sh start|stop|restart|rolling|kill|start-one|redis-stop|redis-start DIR [a|b]}
dir=${2:?DIR is required}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

lb_port=${FLEET_LB_PORT:-38100}
redis_port=${FLEET_REDIS_PORT:-6380}
pg_port=${FLEET_PG_PORT:-38103}
stats_port=${FLEET_STATS_PORT:-38109}
gateway_bin=${GATEWAY_BIN:-gateway}
port_of() { case $1 in a) echo "${FLEET_GATEWAY_A_PORT:-38101}" ;; b) echo "${FLEET_GATEWAY_B_PORT:-38102}" ;; *) echo "fleet: replica is a or b" >&2; exit 2 ;; esac; }

# http_status PORT PATH prints the HTTP status of GET PATH on 127.0.0.1:PORT
# (0 when nothing answers); body_of prints the body. Plain bash, no curl.
http_get() {
  exec 3<>"/dev/tcp/127.0.0.1/$1" 2>/dev/null || return 1
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$2" "$1" >&3
  cat <&3
  exec 3<&-
}
http_status() { local s; s=$(http_get "$1" "$2" | head -n 1 | cut -d' ' -f2) || true; echo "${s:-0}"; }

# await WHAT TEST… retries TEST every 100 ms for up to 30 s.
await() {
  local what=$1; shift
  for _ in $(seq 300); do
    if "$@"; then return 0; fi
    sleep 0.1
  done
  echo "fleet: $what did not happen within 30 s" >&2
  return 1
}
ready() { [ "$(http_status "$(port_of "$1")" /health/ready)" = 200 ]; }
# in_rotation NAME: HAProxy's status CSV shows the replica UP.
in_rotation() { http_get "$stats_port" "/stats;csv" | grep -q "^gateways,$1,.*,UP,"; }
out_of_rotation() { ! in_rotation "$1"; }
alive() { [ -f "$dir/$1.pid" ] && kill -0 "$(cat "$dir/$1.pid")" 2>/dev/null; }
gone() { ! alive "$1"; }

start_redis() {
  mkdir -p "$dir/redis"
  redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$dir/redis" --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
    --appendonly yes --appendfsync always --save "" --maxmemory-policy noeviction
  await "Redis answering" sh -c "redis-cli -p $redis_port ping 2>/dev/null | grep -q PONG"
}

# The throwaway PostgreSQL runs as the caller, its data in DIR/pg; as
# root (initdb refuses root) it runs as the postgres user, its data in a
# folder of /tmp that user can reach, named in DIR/pg.dir.
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
run_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
pg_data() {
  if [ "$(id -u)" != 0 ]; then echo "$dir/pg"; return; fi
  if [ ! -f "$dir/pg.dir" ]; then
    mktemp -d /tmp/idn-fleet-pg.XXXXXX >"$dir/pg.dir"
    chown postgres "$(cat "$dir/pg.dir")"
  fi
  cat "$dir/pg.dir"
}

start_postgres() {
  if [ -n "${GATEWAY_DATABASE_URL:-}" ]; then
    printf '%s\n' "$GATEWAY_DATABASE_URL" >"$dir/database.url"
    return
  fi
  local bin data
  bin=$(pg_bin)
  [ -n "$bin" ] || { echo "fleet: no PostgreSQL (apt-get install postgresql) and no GATEWAY_DATABASE_URL" >&2; exit 1; }
  data=$(pg_data)
  mkdir -p "$data"
  [ -f "$data/PG_VERSION" ] || run_pg "'$bin/initdb' -D '$data' -A trust -U postgres >/dev/null"
  run_pg "'$bin/pg_ctl' -D '$data' -l '$data/log' -w -o \"-k /tmp -p $pg_port -c listen_addresses=127.0.0.1 -c fsync=off\" start >/dev/null"
  echo "postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable" >"$dir/database.url"
}

stop_postgres() {
  [ -z "${GATEWAY_DATABASE_URL:-}" ] || return 0
  local data
  data=$(pg_data)
  if [ -f "$data/postmaster.pid" ]; then
    run_pg "'$(pg_bin)/pg_ctl' -D '$data' -m fast stop >/dev/null" || true
  fi
  if [ -f "$dir/pg.dir" ]; then rm -rf "$data" "$dir/pg.dir"; fi
}

start_gateway() {
  local name=$1 port
  port=$(port_of "$name")
  mkdir -p "$dir/$name"
  GATEWAY_ADDR=127.0.0.1:$port GATEWAY_DATA_DIR=$dir/$name \
    GATEWAY_REDIS_URL=redis://127.0.0.1:$redis_port GATEWAY_DATABASE_URL=$(cat "$dir/database.url") \
    GATEWAY_REPLICA_NAME=$name \
    GATEWAY_PUBLIC_AUTHORITY=127.0.0.1:$lb_port GATEWAY_TRUSTED_PROXY_CIDRS=127.0.0.1/32 \
    GATEWAY_SHUTDOWN_DELAY_SECONDS=${GATEWAY_SHUTDOWN_DELAY_SECONDS:-2} \
    nohup "$gateway_bin" serve >>"$dir/$name.log" 2>&1 &
  echo $! >"$dir/$name.pid"
  await "gateway $name ready" ready "$name"
}

start_haproxy() {
  FLEET_DIR=$dir FLEET_LB_ADDR=127.0.0.1:$lb_port FLEET_STATS_ADDR=127.0.0.1:$stats_port \
    FLEET_GATEWAY_A_ADDR=127.0.0.1:$(port_of a) FLEET_GATEWAY_B_ADDR=127.0.0.1:$(port_of b) \
    haproxy -D -f "$here/haproxy.cfg" 2>>"$dir/haproxy.log"
  await "gateway a in rotation" in_rotation a
  await "gateway b in rotation" in_rotation b
}

stop_pid() { # stop_pid NAME SIGNAL: signal the process and wait for it to end
  if alive "$1"; then
    kill "-$2" "$(cat "$dir/$1.pid")"
    await "$1 to exit" gone "$1"
  fi
  rm -f "$dir/$1.pid"
}

restart() {
  stop_pid "$1" TERM
  await "gateway $1 out of rotation" out_of_rotation "$1"
  start_gateway "$1"
  await "gateway $1 in rotation" in_rotation "$1"
}

case $cmd in
start)
  start_redis
  start_postgres
  start_gateway a
  start_gateway b
  start_haproxy
  echo "fleet: serving on 127.0.0.1:$lb_port (gateways on $(port_of a) and $(port_of b), Redis on $redis_port, PostgreSQL at $(cat "$dir/database.url"))"
  ;;
restart) restart "${3:?a or b}" ;;
rolling) restart a; restart b ;;
kill) stop_pid "${3:?a or b}" KILL ;;
start-one) start_gateway "${3:?a or b}"; await "gateway $3 in rotation" in_rotation "$3" ;;
redis-stop) stop_pid redis KILL ;;
redis-start) start_redis ;;
stop)
  for p in haproxy a b; do stop_pid "$p" TERM; done
  stop_pid redis TERM
  stop_postgres
  ;;
*) echo "fleet: unknown command $cmd" >&2; exit 2 ;;
esac
