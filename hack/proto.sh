#!/usr/bin/env bash
# Regenerates the Go code for proto/ into runtime/services/transport/transportpb.
#
# Usage: hack/proto.sh [output-root]
#
# output-root (default: the repository root) is prepended to the output
# directories of buf.gen.yaml; the freshness test passes a temporary
# directory. No protoc binary is needed: buf compiles the sources and
# every tool runs through `go run` at a pinned version.
set -euo pipefail

BUF_VERSION=v1.75.0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root}"
cd "$root"
go run "github.com/bufbuild/buf/cmd/buf@${BUF_VERSION}" generate --template buf.gen.yaml -o "$out"
