# PostGIS 3 for the PostgreSQL 15 that postgres.sh starts: a Debian package, no server of its
# own. Tests create their own database there and run CREATE EXTENSION postgis in it.

install_postgis() {
  ensure_packages postgresql-15-postgis-3
}

# Nothing to start: PostGIS lives inside the server of postgres.sh
# (FAIRBENCH_TEST_POSTGRES_URL).
start_postgis() {
  [ -f /usr/share/postgresql/15/extension/postgis.control ] \
    || die "PostGIS is not installed (scripts/install-servers postgis)"
}

stop_postgis() { :; }
