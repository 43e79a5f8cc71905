#!/usr/bin/env bash
# Start this node's part of a multi-node job: run the same command on every node.
{%- if cookiecutter.mode == "launch" %}
#   NNODES=2 RDZV_HOST=node0 ./scripts/multinode.sh --epochs 10
# torchrun's c10d rendezvous finds the peers: no node rank to hand out.
# NNODES=1:2 runs on 1 to 2 nodes (elastic); RDZV_CONF is passed to --rdzv-conf.
set -euo pipefail
: "${NNODES:?set NNODES to the number of nodes}"
: "${RDZV_HOST:?set RDZV_HOST to a host every node can reach (any one node)}"
{%- if cookiecutter.model_parallel %}
# Model parallel: one process per GPU pair.
gpu_pairs=$(python -c "import torch; print(max(torch.cuda.device_count() // 2, 1))")
{%- endif %}
# A fresh store for each attempt: the shared rendezvous store would hand
# restarted workers the previous attempt's addresses.
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
exec torchrun \
  --nnodes "$NNODES" \
  --nproc-per-node "${NPROC_PER_NODE:-{{ '$gpu_pairs' if cookiecutter.model_parallel else 'gpu' }}}" \
  --rdzv-backend c10d \
  --rdzv-endpoint "$RDZV_HOST:${RDZV_PORT:-29500}" \
  --rdzv-id "${RDZV_ID:-{{ cookiecutter.project_slug }}}" \
  ${RDZV_CONF:+--rdzv-conf "$RDZV_CONF"} \
  --max-restarts "${MAX_RESTARTS:-0}" \
  train.py "$@"
{%- else %}
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=node0 ./scripts/multinode.sh --epochs 10
# Node 0 hosts the rendezvous on MASTER_ADDR:MASTER_PORT; the others connect.
# NPROCS: processes per node (default: one per GPU{{ ' pair' if cookiecutter.model_parallel }}, or 2 on CPU).
set -euo pipefail
: "${NNODES:?set NNODES to the number of nodes}"
: "${NODE_RANK:?set NODE_RANK to this node's index (0 on MASTER_ADDR)}"
: "${MASTER_ADDR:?set MASTER_ADDR to node 0's address}"
exec python train.py \
  --nnodes "$NNODES" \
  --nprocs "${NPROCS:-0}" \
  --node-rank "$NODE_RANK" \
  --master-addr "$MASTER_ADDR" \
  --master-port "${MASTER_PORT:-29500}" \
  "$@"
{%- endif %}
