#!/usr/bin/env bash
# A one-node Grid Engine cell on this host for the luigi.contrib.sge tests: Debian's gridengine-master,
# -exec and -client, the host as admin, submit and execution host, a queue `all.q` and the parallel
# environment `orte` (SGEJobTask's default `parallel_env`).
#
#   scripts/ensure-gridengine.sh          # install where missing, configure, start the daemons
#   scripts/ensure-gridengine.sh stop     # stop the daemons (qconf -ke, -km)
#
# Idempotent: each step checks first. Installing and starting need root; otherwise it says what is
# missing and exits 0, and the tests skip locally (and fail under CI, which runs this as root).
set -euo pipefail

say() { echo "ensure-gridengine: $*"; }
# qconf reports every change on stderr; show its words only when it fails.
quiet() { local out; out=$("$@" 2>&1) || { echo "$out" >&2; return 1; }; }

export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
COMMON="$SGE_ROOT/$SGE_CELL/common"
HOST=$(hostname)
PE_NAME=orte   # luigi.contrib.sge.SGEJobTask.parallel_env's default
SLOTS=8

if [ "${1:-}" = stop ]; then
    if pgrep -x sge_qmaster >/dev/null; then
        qconf -ke all >/dev/null 2>&1 || true
        qconf -km >/dev/null 2>&1 || true
        say "stopped"
    fi
    exit 0
fi

install_packages() {
    command -v qsub >/dev/null 2>&1 && [ -x /usr/sbin/sge_qmaster ] && [ -x /usr/sbin/sge_execd ] && return 0
    say "installing gridengine-master, gridengine-exec and gridengine-client with apt-get"
    # The packages' own set-up creates the cell when asked through these debconf questions.
    debconf-set-selections <<EOF
gridengine-common shared/gridengineconfig boolean true
gridengine-common shared/gridenginecell string $SGE_CELL
gridengine-common shared/gridenginemaster string $HOST
gridengine-master gridengine/adminmail string none
EOF
    apt-get update -qq
    # Their services are not started here (policy-rc.d refuses in containers): start_daemons does it.
    DEBIAN_FRONTEND=noninteractive apt-get install -o DPkg::Lock::Timeout=300 -y -qq --no-install-recommends \
        gridengine-master gridengine-exec gridengine-client >/dev/null
}

# Grid Engine refuses a client whose address resolves back to another name (here 127.0.0.1 gives
# `localhost`, not the host name): host_aliases tells it both names are this host.
resolve_host() {
    echo "$HOST" >"$COMMON/act_qmaster"
    local address reverse
    address=$(getent hosts "$HOST" | awk '{print $1; exit}')
    reverse=$(getent hosts "$address" | awk '{print $2; exit}')
    if [ -n "$reverse" ] && [ "$reverse" != "$HOST" ]; then
        echo "$HOST $reverse" >"$COMMON/host_aliases"
    fi
}

wait_for() {  # what, then a command that succeeds once it is so; 60 s at most
    local what=$1
    shift
    for _ in $(seq 120); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.5
    done
    say "gave up waiting for $what"
    exit 1
}

start_daemons() {
    mkdir -p /var/run/gridengine
    chown sgeadmin:sgeadmin /var/run/gridengine
    pgrep -x sge_qmaster >/dev/null || /usr/sbin/sge_qmaster
    wait_for "sge_qmaster to answer" qconf -sh
}

queue_instance_up() {  # the queue on this host has its load report and no alarm/unknown state
    qstat -f -q "all.q@$HOST" | awk -v q="all.q@$HOST" '$1 == q && NF == 5 {found = 1} END {exit !found}'
}

configure_cell() {
    local dir
    dir=$(mktemp -d)
    qconf -ss 2>/dev/null | grep -qx "$HOST" || quiet qconf -as "$HOST"
    qconf -sel 2>/dev/null | grep -qx "$HOST" || {
        printf 'hostname %s\nload_scaling NONE\ncomplex_values NONE\nuser_lists NONE\nxuser_lists NONE\n' "$HOST" >"$dir/exec"
        printf 'projects NONE\nxprojects NONE\nusage_scaling NONE\nreport_variables NONE\n' >>"$dir/exec"
        quiet qconf -Ae "$dir/exec"
    }
    # The tests may run as root, whom the default configuration refuses (min_uid 1000).
    qconf -sconf global | sed -e '/^#global:/d' -e 's/^min_uid .*/min_uid 0/' -e 's/^min_gid .*/min_gid 0/' >"$dir/global"
    quiet qconf -Mconf "$dir/global"
    # Schedule every second, and at once on submit and finish, rather than every 15 s.
    qconf -ssconf | sed -e 's/^schedule_interval .*/schedule_interval 0:0:1/' \
        -e 's/^flush_submit_sec .*/flush_submit_sec 1/' -e 's/^flush_finish_sec .*/flush_finish_sec 1/' >"$dir/sconf"
    quiet qconf -Msconf "$dir/sconf"
    qconf -spl 2>/dev/null | grep -qx "$PE_NAME" || {
        printf 'pe_name %s\nslots %s\nuser_lists NONE\nxuser_lists NONE\nstart_proc_args /bin/true\n' "$PE_NAME" "$SLOTS" >"$dir/pe"
        printf 'stop_proc_args /bin/true\nallocation_rule $fill_up\ncontrol_slaves TRUE\njob_is_first_task FALSE\n' >>"$dir/pe"
        printf 'urgency_slots min\naccounting_summary FALSE\nqsort_args NONE\n' >>"$dir/pe"
        quiet qconf -Ap "$dir/pe"
    }
    qconf -sql 2>/dev/null | grep -qx all.q || {
        # No load threshold: a busy shared test machine must not put the only queue in alarm.
        qconf -sq | sed -e 's/^qname .*/qname all.q/' -e "s/^hostlist .*/hostlist $HOST/" \
            -e 's/^load_thresholds .*/load_thresholds NONE/' -e "s/^pe_list .*/pe_list $PE_NAME/" \
            -e "s/^slots .*/slots $SLOTS/" -e 's|^shell .*|shell /bin/sh|' >"$dir/queue"
        quiet qconf -Aq "$dir/queue"
    }
    rm -rf "$dir"
}

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    if command -v qsub >/dev/null 2>&1 && qstat >/dev/null 2>&1; then say "cell answering"; exit 0; fi
    say "not root: cannot install or start Grid Engine (the sge tests will skip)"
    exit 0
fi
install_packages
resolve_host
start_daemons
configure_cell
pgrep -x sge_execd >/dev/null || /usr/sbin/sge_execd
wait_for "the queue all.q@$HOST to come up" queue_instance_up
say "one-node cell on $HOST: queue all.q, parallel environment $PE_NAME ($SLOTS slots)"
