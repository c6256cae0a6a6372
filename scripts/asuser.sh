# asuser CMD...: runs CMD as the postgres user if this is root, which
# PostgreSQL refuses to run as. Sourced by the scripts that start a
# throwaway PostgreSQL.
asuser() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}
