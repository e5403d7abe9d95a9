#!/usr/bin/env bash
# Slurm prolog (slurm.conf: PrologSlurmctld=/usr/share/rocefab/slurm/prolog.sh, run
# once per job on the controller): registers the job and its ranks with
# rocefab-collectord, so diagnosis knows which NICs and paths the job uses.
# A failure is logged and never blocks the job.
#
# Settings (environment or /etc/rocefab/slurm.env):
#   ROCEFAB_COLLECTOR   host:port of rocefab-collectord (default 127.0.0.1:9410)
#   ROCEFAB_TLS_CA, ROCEFAB_TLS_CERT, ROCEFAB_TLS_KEY
#                       the Slurm controller's client certificate; its CN
#                       must hold the operator role at the collector
#                       (docs/security.md)
#   ROCEFAB_TOPOLOGY    topology YAML, to map each GPU to its NIC (optional)
#   ROCEFAB_GPUS        GPUs per host (default: SLURM_GPUS_ON_NODE, else 8)
set -u
set -a  # the rocefab CLI reads ROCEFAB_TLS_* from the environment
[ -r /etc/rocefab/slurm.env ] && . /etc/rocefab/slurm.env
set +a
collector=${ROCEFAB_COLLECTOR:-127.0.0.1:9410}
gpus=${ROCEFAB_GPUS:-${SLURM_GPUS_ON_NODE:-8}}
args=(--collector "$collector" job start --id "${SLURM_JOB_ID:?}" --name "${SLURM_JOB_NAME:-}"
      --hostlist "${SLURM_JOB_NODELIST:?}" --gpus-per-host "$gpus")
[ -n "${ROCEFAB_TOPOLOGY:-}" ] && args+=(--topology "$ROCEFAB_TOPOLOGY")
if ! out=$(rocefab "${args[@]}" 2>&1); then
  logger -t rocefab-prolog "job ${SLURM_JOB_ID}: not registered: $out"
fi
exit 0
