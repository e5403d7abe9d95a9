#!/usr/bin/env bash
# Slurm epilog (slurm.conf: EpilogSlurmctld=/usr/share/rocefab/slurm/epilog.sh):
# marks the job ended in rocefab-collectord. Never fails the job.
set -u
set -a  # the rocefab CLI reads ROCEFAB_TLS_* from the environment
[ -r /etc/rocefab/slurm.env ] && . /etc/rocefab/slurm.env
set +a
collector=${ROCEFAB_COLLECTOR:-127.0.0.1:9410}
if ! out=$(rocefab --collector "$collector" job end "${SLURM_JOB_ID:?}" 2>&1); then
  logger -t rocefab-epilog "job ${SLURM_JOB_ID}: not ended: $out"
fi
exit 0
