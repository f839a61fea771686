#!/usr/bin/env bash
# Runs the chaos suite's full version: poolsim proxy beside PgBouncer 1.18,
# one throwaway PostgreSQL, every scenario of bench/chaos at full size
# (5,000 idle clients, a minute of backend kills, three crash-restarts, 200
# slowloris connections, 23 killed lock holders, a soak of
# POOLSIM_CHAOS_SOAK, default 10m), and writes the figures table to
# results/chaos/full.md (quoted in docs/proxy.md), or to POOLSIM_CHAOS_OUT.
#
# Usage: bench/chaos.sh [go test flags, e.g. -run TestSoak]
# Needs Go, the PostgreSQL server binaries and pgbouncer (as .ci/run
# installs them); as root, PostgreSQL and PgBouncer run as "postgres".
set -euo pipefail
export PATH=/usr/local/go/bin:$PATH
cd "$(dirname "$0")/.."
mkdir -p results/chaos
POOLSIM_CHAOS=full POOLSIM_CHAOS_OUT="${POOLSIM_CHAOS_OUT:-$PWD/results/chaos/full.md}" \
  go test -count=1 -timeout 90m -v ./bench/chaos "$@"
