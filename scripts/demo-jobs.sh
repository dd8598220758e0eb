#!/usr/bin/env bash
# The jobs the demo runs inside `corral start --test-size=16`: CORRAL_URI is set.
set -euo pipefail
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

say "The cluster"
corral nodes

say "A 4-node, 8-task job: each task prints where it runs"
corral run -N4 -n8 -l sh -c 'echo "rank $CORRAL_TASK_RANK of $CORRAL_NTASKS on $CORRAL_NODENAME ($CORRAL_CPUS_ON_NODE cpus)"' | sort -n

say "A batch job with #CORRAL directives, and a job that depends on it"
cat > hello.sh <<'SCRIPT'
#!/bin/sh
#CORRAL -N 2
#CORRAL -J hello
#CORRAL -o hello-%j.out
echo "batch job $CORRAL_JOBID on $CORRAL_NODELIST"
sleep 1
SCRIPT
first=$(corral batch --parsable hello.sh)
second=$(corral submit --dependency=afterok:"$first" -o after-%j.out echo "ran after job $first")
echo "submitted $first, then $second (afterok:$first)"
corral queue
corral wait "$first" "$second"
cat hello-"$first".out after-"$second".out

say "Steps: a batch job runs three steps inside its allocation, then the accounting"
cat > steps.sh <<'SCRIPT'
#!/bin/sh
#CORRAL -N 4 -n 8
#CORRAL -o steps-%j.out
corral run -N4 -n8 -l sh -c 'echo "step $CORRAL_STEPID rank $CORRAL_TASK_RANK on $CORRAL_NODENAME"' | sort -n
corral run -N2 -n2 sh -c 'echo "step $CORRAL_STEPID on $CORRAL_NODENAME"' | sort
corral run -n1 sh -c 'exit 3' || echo "step 2 exited with $?"
SCRIPT
steps=$(corral batch --parsable steps.sh)
corral wait "$steps"
cat steps-"$steps".out
corral history -j "$steps"

say "A job that runs too long is stopped at its time limit"
corral run -t 2s sleep 60 || echo "exit status $? (time limit)"

say "Cancelling a job"
long=$(corral submit -o /dev/null sleep 300)
sleep 0.5
corral cancel "$long"
corral wait "$long" || true
corral show job "$long" | grep -E 'JobState|Result|Exception' || true

say "The eventlog of job $first"
corral eventlog "$first"

ufm_pkeys() {
  python3 -c 'import base64, json, sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/ufmRest/resources/pkeys?guids_data=true")
req.add_header("Authorization", "Basic " + base64.b64encode(b"demo:demo").decode())
keys = json.load(urllib.request.urlopen(req))
for key, p in keys.items():
    print("UFM: partition key", key, "members", " ".join(g["guid"] for g in p["guids"]))
if not keys:
    print("UFM: no partition keys")' "$CORRAL_DEMO_UFM"
}

# demo.sh starts the cluster with Infiniband sysfs trees and the UFM emulator.
if [ -n "${CORRAL_DEMO_UFM:-}" ]; then
  say "Infiniband: node classes, and a node whose IbFabric2 port is down"
  corral ib classes
  corral nodes --capabilities 'node[2-4]'

  say "Infiniband: a 2-node job on IbFabric2 in a partition of its own (its key is made in UFM first)"
  corral run -N2 --ib 'device="MT28908 Family [ConnectX-6]",fabric=IbFabric2,partition=job' sh -c \
    'echo "$CORRAL_NODENAME: CORRAL_IB_DEVICES=$CORRAL_IB_DEVICES UCX_NET_DEVICES=$UCX_NET_DEVICES"
     if [ "$CORRAL_NODENAME" = node0 ]; then corral ib show; fi; sleep 3' &
  sleep 2
  ufm_pkeys
  wait
  sleep 0.5
  echo "after the job:"
  ufm_pkeys
fi

say "All jobs"
corral queue -a
