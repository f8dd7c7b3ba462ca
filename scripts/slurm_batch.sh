#!/usr/bin/env bash
# A Slurm job array over one batch file: each array task runs one shard of
# the records into its own results file and resumes it when the task runs
# again (a requeued or preempted task, or the whole array submitted again).
#
#   sbatch --array=1-N [--cpus-per-task=C] scripts/slurm_batch.sh MODEL INPUT OUTDIR [flags...]
#   scripts/merge_shards.sh OUTDIR/part-*.jsonl > results.jsonl     # once all tasks are done
#
# Task I of N runs records I, I+N, I+2N, ... (--shard I/N) into OUTDIR/part-I.jsonl
# (failed records into OUTDIR/errors-I.jsonl) with as many threads as Slurm gave it.
# Extra flags go to `smallmind generate` (-n 64, --temp 0, --chat-template FILE, ...).
# SMALLMIND names the binary (default: smallmind on PATH).
#SBATCH --job-name=smallmind-batch
#SBATCH --cpus-per-task=2
#SBATCH --requeue
set -eu
if [ $# -lt 3 ]; then
    echo "usage: sbatch --array=1-N $0 MODEL INPUT OUTDIR [smallmind generate flags...]" >&2
    exit 2
fi
MODEL=$1 INPUT=$2 OUT=$3
shift 3
: "${SLURM_ARRAY_TASK_ID:?run it with sbatch --array=1-N}"
N=${SLURM_ARRAY_TASK_COUNT:-$((SLURM_ARRAY_TASK_MAX - SLURM_ARRAY_TASK_MIN + 1))}
I=$((SLURM_ARRAY_TASK_ID - ${SLURM_ARRAY_TASK_MIN:-1} + 1))
mkdir -p "$OUT"
exec "${SMALLMIND:-smallmind}" generate -m "$MODEL" --batch "$INPUT" --shard "$I/$N" \
    --output "$OUT/part-$I.jsonl" --errors "$OUT/errors-$I.jsonl" --resume \
    -t "${SLURM_CPUS_PER_TASK:-1}" -q "$@"
