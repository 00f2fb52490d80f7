# pidfile.sh — sourced by the scripts under hack/ that start servers in
# the background and find them again by a pid file.
#
# pidfile_pid FILE PATTERN prints the pid recorded in FILE when that
# process is alive and its command line (arguments joined by spaces)
# matches the grep pattern PATTERN. A pid file outlives a server that died
# (a fault test's kill -9, a crash), and its pid is recycled by whatever
# runs next: taken for the server, start would wait for a stranger to
# answer and stop would signal it.
pidfile_pid() {
	local pid
	[[ -f "$1" ]] || return 1
	pid="$(cat "$1")"
	[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2" || return 1
	printf '%s' "$pid"
}
