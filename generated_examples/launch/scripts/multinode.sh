#!/usr/bin/env bash
# Start this node's part of a multi-node job: run the same command on every node.
#   NNODES=2 RDZV_HOST=node0 ./scripts/multinode.sh --epochs 10
# torchrun's c10d rendezvous finds the peers: no node rank to hand out.
# NNODES=1:2 runs on 1 to 2 nodes (elastic); RDZV_CONF is passed to --rdzv-conf.
set -euo pipefail
: "${NNODES:?set NNODES to the number of nodes}"
: "${RDZV_HOST:?set RDZV_HOST to a host every node can reach (any one node)}"
# A fresh store for each attempt: the shared rendezvous store would hand
# restarted workers the previous attempt's addresses.
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
exec torchrun \
  --nnodes "$NNODES" \
  --nproc-per-node "${NPROC_PER_NODE:-gpu}" \
  --rdzv-backend c10d \
  --rdzv-endpoint "$RDZV_HOST:${RDZV_PORT:-29500}" \
  --rdzv-id "${RDZV_ID:-launch}" \
  ${RDZV_CONF:+--rdzv-conf "$RDZV_CONF"} \
  --max-restarts "${MAX_RESTARTS:-0}" \
  train.py "$@"
