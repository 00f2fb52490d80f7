#!/usr/bin/env bash
# fetch.sh downloads Apache Cassandra's server jar (org.apache.cassandra:
# cassandra-all) and its runtime dependencies with mvn into
# $CASSANDRA_HOME/lib (default ~/.cache/concord/cassandra-<version>/lib).
# It does nothing when that directory is already complete.
set -euo pipefail
source "$(dirname "$0")/env.sh"

if [[ -f "$CASSANDRA_HOME/.complete" ]]; then
	log "jars for $CASSANDRA_VERSION already in $CASSANDRA_HOME/lib"
	exit 0
fi
command -v mvn >/dev/null || { log "mvn not found: install Maven (Debian package maven)"; exit 1; }
command -v java >/dev/null || { log "java not found: install a Java 17 runtime"; exit 1; }

mkdir -p "$CASSANDRA_HOME"
tmp="$(mktemp -d "$CASSANDRA_HOME/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
log "fetching cassandra-all $CASSANDRA_VERSION and its runtime dependencies with mvn"
start=$SECONDS
# -B: batch mode; Maven prints one line per downloaded artifact, which is
# the progress shown here.
mvn -B -f "$HACK_DIR/pom.xml" \
	-Dcassandra.version="$CASSANDRA_VERSION" \
	dependency:copy-dependencies \
	-DincludeScope=runtime \
	-DoutputDirectory="$tmp/lib" 2>&1 |
	grep --line-buffered -E 'Downloaded from|BUILD|ERROR' >&2 || true
if [[ ! -f "$tmp/lib/cassandra-all-$CASSANDRA_VERSION.jar" ]]; then
	log "mvn did not produce cassandra-all-$CASSANDRA_VERSION.jar; run with the same pom by hand:"
	log "  mvn -f $HACK_DIR/pom.xml -Dcassandra.version=$CASSANDRA_VERSION dependency:copy-dependencies"
	exit 1
fi
rm -rf "$CASSANDRA_HOME/lib"
mv "$tmp/lib" "$CASSANDRA_HOME/lib"
touch "$CASSANDRA_HOME/.complete"
log "fetched $(ls "$CASSANDRA_HOME/lib" | wc -l) jars in $((SECONDS - start))s into $CASSANDRA_HOME/lib"
