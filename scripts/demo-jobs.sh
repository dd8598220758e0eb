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

say "All jobs"
corral queue -a
