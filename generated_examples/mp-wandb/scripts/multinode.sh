#!/usr/bin/env bash
# Start this node's part of a multi-node job: run the same command on every node.
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=node0 ./scripts/multinode.sh --epochs 10
# Node 0 hosts the rendezvous on MASTER_ADDR:MASTER_PORT; the others connect.
# NPROCS: processes per node (default: one per GPU, or 2 on CPU).
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
