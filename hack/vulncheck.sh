#!/usr/bin/env bash
# vulncheck runs govulncheck over the module against the Go vulnerability
# database taken from the Go module proxy (the golang.org/x/vulndb module
# carries every OSV report in data/osv), indexed locally: `make lint` needs
# no host but the proxy. A pinned database version is indexed once into
# $CONCORD_CACHE/vulndb/<version>.
#
# VULNDB_VERSION  vulndb module version (default: the pinned one below;
#                 "latest" for the newest reports)
# GOVULNCHECK_DB  use this database URL instead (e.g. https://vuln.go.dev)
# VULNCHECK_REQUIRED=1  fail when the database cannot be fetched instead of
#                 warning and skipping (CI with network sets it)
set -euo pipefail

GO=${GO:-go}
GOVULNCHECK_VERSION=${GOVULNCHECK_VERSION:-v1.9.0}
VULNDB_VERSION=${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}
CACHE=${CONCORD_CACHE:-$HOME/.cache/concord}

skip() {
	if [ "${VULNCHECK_REQUIRED:-0}" = 1 ]; then
		echo "vulncheck: $1" >&2
		exit 1
	fi
	echo "WARNING: vulncheck skipped: $1 (set VULNCHECK_REQUIRED=1 to fail instead)" >&2
	exit 0
}

db=${GOVULNCHECK_DB:-}
if [ -z "$db" ]; then
	info=$($GO mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" 2>/dev/null) ||
		skip "cannot download golang.org/x/vulndb@$VULNDB_VERSION from the Go module proxy"
	dir=$(printf '%s' "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	ver=$(printf '%s' "$info" | sed -n 's/^[[:space:]]*"Version": "\(.*\)",$/\1/p')
	[ -d "$dir/data/osv" ] || skip "golang.org/x/vulndb@$ver has no data/osv"
	out="$CACHE/vulndb/$ver"
	if [ ! -f "$out/index/db.json" ]; then
		rm -rf "$out.tmp"
		mkdir -p "$(dirname "$out")"
		$GO run "golang.org/x/vulndb/cmd/indexdb@$ver" -vulns "$dir/data/osv" -out "$out.tmp" ||
			skip "cannot build the indexer golang.org/x/vulndb/cmd/indexdb@$ver"
		mv "$out.tmp" "$out"
	fi
	db="file://$out"
fi
# The standard library is checked as the toolchain go.mod names builds it
# (fetched from the module proxy when the local go is older), not as
# whatever go is on PATH; a local GOTOOLCHAIN=local would otherwise pin the
# scan to an older, vulnerable release.
tc=$(sed -n 's/^toolchain \(go[0-9.]*\)$/\1/p' go.mod)
if [ -n "$tc" ] && [ "$($GO env GOVERSION)" != "$tc" ]; then
	export GOTOOLCHAIN=$tc
fi
echo "govulncheck $GOVULNCHECK_VERSION, database $db, toolchain ${GOTOOLCHAIN:-$($GO env GOVERSION)}"
exec $GO run "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION" -db "$db" ./...
