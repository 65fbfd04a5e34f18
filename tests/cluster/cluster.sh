#!/usr/bin/env bash
# A private one-node SLURM cluster on this machine, for the tests of the SLURM profile
# (tests/cluster/test_slurm.py): Debian's slurm-wlm (22.05) with its accounting database (slurmdbd over a
# MariaDB of its own), run as root.
#
#   tests/cluster/cluster.sh up   [DIR]   install (if missing), configure and start; wait until the node is idle
#   tests/cluster/cluster.sh down [DIR]   cancel its jobs, stop the daemons it started (and only those)
#   tests/cluster/cluster.sh status [DIR] exit 0 when its daemons run and the node is up
#   tests/cluster/cluster.sh env  [DIR]   the shell lines that point SLURM's commands at it
#
# DIR (default $VICURL_SLURM_DIR, else /tmp/vicurl-slurm) holds everything: etc/slurm.conf,
# slurmdbd.conf and gres.conf, a munge key and socket of its own, the database's files, state,
# spool, logs, the daemons' PIDs, fake GPU device files, and bin/ with wrappers of the client
# commands that set SLURM_CONF. Nothing is written to /etc/slurm, /etc/mysql or /run, and the ports
# are not the defaults (VICURL_SLURM_PORT, default 16817, and the next three: slurmd, slurmdbd,
# MariaDB on 127.0.0.1), so a real SLURM or database on the machine is left alone.
# `eval "$(tests/cluster/cluster.sh env)"` then `sbatch`, `squeue`, `snakemake --profile ...` use it.
#
# The node claims more than the machine has (SlurmdParameters=config_overrides): 128 CPUs, 2 TB,
# 8 A100 GPUs (gres files that are links to /dev/null), so the profile's requests (a train job:
# 8 GPUs x 8 CPUs, 480 GB) are schedulable; nothing is enforced (no cgroups). The partitions are
# the profile's placeholder names, so slurm-a100/config.yaml runs unchanged. Jobs are recorded in the
# accounting database as on a production cluster (`sacct`: states, elapsed times, the GPUs each
# job was given) and the profile's placeholder account; slurmctld also keeps a finished job for
# MinJobAge (1 h) for `scontrol show job`.
set -euo pipefail

cmd=${1:-}
DIR=${2:-${VICURL_SLURM_DIR:-/tmp/vicurl-slurm}}
case "$DIR" in /*) ;; *) DIR="$PWD/$DIR" ;; esac
PORT=${VICURL_SLURM_PORT:-16817}
NODE=vicurl-node
CONF="$DIR/etc/slurm.conf"
PKGS="munge slurmctld slurmd slurm-client slurmdbd mariadb-server"
CLIENTS="sbatch srun salloc squeue scontrol scancel sinfo sacct sacctmgr sshare sstat"

log() { echo "cluster.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# ------------------------------------------------------------------ installation

have_binaries() {
    command -v munged >/dev/null && command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
        && command -v sbatch >/dev/null && command -v scontrol >/dev/null && command -v slurmdbd >/dev/null \
        && command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null
}

install() {
    have_binaries && return 0
    [ "$(id -u)" -eq 0 ] || die "SLURM is not installed and this is not root (apt-get install $PKGS)"
    command -v apt-get >/dev/null || die "SLURM is not installed and there is no apt-get"
    log "installing $PKGS"
    # policy-rc.d: the packages' services are not started (this script starts its own daemons)
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; made_policy=1; fi
    local rc=0
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PKGS; } \
        >"$DIR/log/apt.log" 2>&1 || rc=$?
    [ "$made_policy" -eq 0 ] || rm -f "$policy"
    [ "$rc" -eq 0 ] && have_binaries || die "apt-get install $PKGS failed (see $DIR/log/apt.log)"
}

# ------------------------------------------------------------------ configuration

configure() {
    mkdir -p "$DIR"/{etc,bin,state,spool,log,pids,dev,munge,mysql}
    chmod 700 "$DIR/munge"
    for i in 0 1 2 3 4 5 6 7; do ln -sfn /dev/null "$DIR/dev/gpu$i"; done
    if [ ! -s "$DIR/munge/munge.key" ]; then
        (umask 077; head -c 1024 /dev/urandom >"$DIR/munge/munge.key")
    fi
    chmod 600 "$DIR/munge/munge.key"
    : >"$DIR/etc/plugstack.conf"
    cat >"$CONF.tmp" <<EOF
# written by tests/cluster/cluster.sh: a private one-node test cluster
ClusterName=vicurltest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/pids/slurmctld.own.pid
SlurmdPidFile=$DIR/pids/slurmd.own.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$DIR/etc/plugstack.conf
MailProg=/bin/true
# no cgroups: processes tracked by parentage, nothing confined (memory and GPUs are not enforced)
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$((PORT + 2))
AccountingStorageTRES=gres/gpu
# for slurmdbd, the munge socket to authenticate with (this cluster's own)
AccountingStoragePass=$DIR/munge/munge.socket
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
# the node may claim more CPUs, memory and GPUs than the machine has
SlurmdParameters=config_overrides
ReturnToService=2
# finished jobs stay visible to squeue / scontrol for an hour (sacct keeps them for good)
MinJobAge=3600
KillWait=5
InactiveLimit=0
GresTypes=gpu
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=128 RealMemory=2000000 Gres=gpu:a100:8 State=UNKNOWN
# the placeholder names of slurm-a100/config.yaml
PartitionName=YOUR_CPU_PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=YOUR_GPU_PARTITION Nodes=$NODE MaxTime=INFINITE State=UP
EOF
    mv "$CONF.tmp" "$CONF"
    # slurmdbd reads slurmdbd.conf beside SLURM_CONF; it must be private to SlurmUser
    (umask 077; cat >"$DIR/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$((PORT + 2))
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$((PORT + 3))
StorageUser=root
StorageLoc=vicurl_acct
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/pids/slurmdbd.own.pid
DebugLevel=info
EOF
    )
    # the database: root without a password, reachable on 127.0.0.1 only
    if [ ! -d "$DIR/mysql/data/mysql" ]; then
        mariadb-install-db --no-defaults --datadir="$DIR/mysql/data" --user=root \
            --auth-root-authentication-method=normal --skip-test-db >"$DIR/log/mariadb-install.log" 2>&1 \
            || die "mariadb-install-db failed (see $DIR/log/mariadb-install.log)"
    fi
    cat >"$DIR/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=$NODE Name=gpu Type=a100 File=$DIR/dev/gpu[0-7]
EOF
    # client wrappers: the executor plugin's job step drops SLURM_* variables (SLURM_CONF too) before
    # its nested `srun`, so the commands must find the configuration without them
    local c real
    for c in $CLIENTS; do
        real=$(command -v "$c" 2>/dev/null) || continue
        case "$real" in "$DIR"/bin/*) real=/usr/bin/$c ;; esac
        printf '#!/bin/sh\nSLURM_CONF=%q exec %q "$@"\n' "$CONF" "$real" >"$DIR/bin/$c.tmp"
        chmod +x "$DIR/bin/$c.tmp"
        mv "$DIR/bin/$c.tmp" "$DIR/bin/$c"
    done
}

# ------------------------------------------------------------------ processes

# the PID recorded for a daemon, if that process still is this daemon of this cluster
own_pid() {
    local name=$1 pid
    [ -s "$DIR/pids/$name" ] || return 1
    pid=$(cat "$DIR/pids/$name")
    [ -r "/proc/$pid/cmdline" ] || return 1
    # this cluster's: its folder on the command line (slurmdbd takes none: in SLURM_CONF, its environment)
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$name" || return 1
    { tr '\0' ' ' <"/proc/$pid/cmdline"; tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qF -- "$DIR" || return 1
    echo "$pid"
}

start() {  # start NAME ARGS...: in the foreground of its own session, its PID recorded
    local name=$1; shift
    if own_pid "$name" >/dev/null; then return 0; fi
    setsid "$@" </dev/null >>"$DIR/log/$name.out" 2>&1 &
    echo $! >"$DIR/pids/$name"
}

stop() {
    local name=$1 pid i
    pid=$(own_pid "$name") || { rm -f "$DIR/pids/$name"; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
    if [ -d "/proc/$pid" ]; then log "$name ($pid) did not stop, killing it"; kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$DIR/pids/$name"
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local secs=$1 what=$2 i; shift 2
    for i in $(seq $((secs * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
    log "timed out after ${secs}s waiting for $what"
    return 1
}

munge_ok() { munge -n -S "$DIR/munge/munge.socket" | unmunge -S "$DIR/munge/munge.socket"; }
db_ok() { mariadb-admin --no-defaults -h 127.0.0.1 -P $((PORT + 3)) -u root ping; }
dbd_ok() { SLURM_CONF=$CONF sacctmgr -n show cluster format=cluster; }
ctld_ok() { SLURM_CONF=$CONF scontrol ping | grep -q "is UP"; }
node_state() { SLURM_CONF=$CONF sinfo -h -n "$NODE" -o %t 2>/dev/null | head -1; }
node_ok() { case "$(node_state)" in idle*|mix*|alloc*) return 0 ;; *) return 1 ;; esac; }

show_logs() {
    local f
    for f in "$DIR"/log/*.log "$DIR"/log/*.out; do
        [ -s "$f" ] && { log "--- $f"; tail -n 15 "$f" >&2; }
    done
    return 0
}

up() {
    mkdir -p "$DIR/log"
    install
    configure
    if status; then
        log "already up ($DIR)"
        return 0
    fi
    local t0=$SECONDS
    start munged "$(command -v munged)" -F --force --socket="$DIR/munge/munge.socket" \
        --key-file="$DIR/munge/munge.key" --log-file="$DIR/log/munged.log" \
        --pid-file="$DIR/pids/munged.own.pid" --seed-file="$DIR/munge/munged.seed"
    wait_for 20 munged munge_ok || { show_logs; return 1; }
    start mariadbd "$(command -v mariadbd)" --no-defaults --datadir="$DIR/mysql/data" --user=root \
        --socket="$DIR/mysql/mysqld.sock" --port=$((PORT + 3)) --bind-address=127.0.0.1 \
        --pid-file="$DIR/mysql/mysqld.pid" --log-error="$DIR/log/mariadb.log"
    wait_for 60 MariaDB db_ok || { show_logs; return 1; }
    SLURM_CONF=$CONF start slurmdbd "$(command -v slurmdbd)" -D
    wait_for 60 slurmdbd dbd_ok || { show_logs; return 1; }
    # the cluster and the profile's placeholder account, root in it (as a user's account on a cluster)
    local have
    have=$(SLURM_CONF=$CONF sacctmgr -n -P show assoc format=cluster,account,user)
    grep -q "^vicurltest|" <<<"$have" || SLURM_CONF=$CONF sacctmgr -i add cluster vicurltest >/dev/null
    grep -qi "|YOUR_SLURM_ACCOUNT|root$" <<<"$have" || {  # SLURM keeps account names in lower case
        SLURM_CONF=$CONF sacctmgr -i add account YOUR_SLURM_ACCOUNT >/dev/null
        SLURM_CONF=$CONF sacctmgr -i add user root account=YOUR_SLURM_ACCOUNT >/dev/null; }
    # -c: a fresh start, no jobs from an earlier run of this cluster
    start slurmctld "$(command -v slurmctld)" -D -c -f "$CONF"
    wait_for 30 slurmctld ctld_ok || { show_logs; return 1; }
    start slurmd "$(command -v slurmd)" -D -N "$NODE" -f "$CONF"
    wait_for 30 "the node to be idle (state: $(node_state))" node_ok || {
        SLURM_CONF=$CONF scontrol show node "$NODE" >&2 || true; show_logs; return 1; }
    log "up in $((SECONDS - t0))s: $DIR (node $NODE: $(node_state))"
}

down() {
    [ -d "$DIR/pids" ] || return 0
    if own_pid slurmctld >/dev/null; then
        local ids
        ids=$(SLURM_CONF=$CONF squeue -h -t PD,R,CG,S -o %i 2>/dev/null || true)
        if [ -n "$ids" ]; then
            # shellcheck disable=SC2086
            SLURM_CONF=$CONF scancel $ids 2>/dev/null || true
            wait_for 30 "the jobs to end" sh -c "[ -z \"\$(SLURM_CONF='$CONF' squeue -h -t R,CG -o %i)\" ]" || true
        fi
    fi
    stop slurmd
    stop slurmctld
    stop slurmdbd
    stop mariadbd
    stop munged
    log "down ($DIR)"
}

status() {
    own_pid munged >/dev/null && own_pid mariadbd >/dev/null && own_pid slurmdbd >/dev/null \
        && own_pid slurmctld >/dev/null && own_pid slurmd >/dev/null && node_ok
}

case "$cmd" in
    up) up ;;
    down) down ;;
    status) status ;;
    env) printf 'export SLURM_CONF=%q\nexport PATH=%q:"$PATH"\n' "$CONF" "$DIR/bin" ;;
    *) echo "usage: $0 up|down|status|env [DIR]" >&2; exit 2 ;;
esac
