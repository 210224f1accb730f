#!/bin/sh
# The official postgres image's first-start contract, for hack/dev-images/pgvector: on an
# empty PGDATA, initdb with POSTGRES_USER and POSTGRES_PASSWORD, create POSTGRES_DB, run
# /docker-entrypoint-initdb.d/*.sql and *.sh on a server reachable only by its socket; then
# run the command (postgres) listening on every address with password authentication.
set -eu

if [ "${1:-}" = postgres ] && [ ! -s "${PGDATA}/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "docker-entrypoint: POSTGRES_PASSWORD is required to initialise ${PGDATA}" >&2
    exit 1
  fi
  user=${POSTGRES_USER:-postgres}
  db=${POSTGRES_DB:-${user}}
  mkdir -p "${PGDATA}"
  chmod 700 "${PGDATA}"
  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD}" >"${pwfile}"
  initdb --username="${user}" --pwfile="${pwfile}" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 -D "${PGDATA}" >/dev/null
  rm -f "${pwfile}"
  printf "listen_addresses = '*'\n" >>"${PGDATA}/postgresql.conf"
  printf 'host all all all scram-sha-256\n' >>"${PGDATA}/pg_hba.conf"
  pg_ctl -D "${PGDATA}" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "${db}" != postgres ]; then
    psql -v ON_ERROR_STOP=1 --username="${user}" --dbname=postgres \
      -c "CREATE DATABASE \"${db}\"" >/dev/null
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case ${f} in
      *.sql) echo "docker-entrypoint: running ${f}" && psql -v ON_ERROR_STOP=1 --username="${user}" --dbname="${db}" -f "${f}" >/dev/null ;;
      *.sh)
        echo "docker-entrypoint: running ${f}"
        # shellcheck source=/dev/null
        . "${f}"
        ;;
      *) ;;
    esac
  done
  pg_ctl -D "${PGDATA}" -m fast -w stop >/dev/null
  echo "docker-entrypoint: initialised ${PGDATA} (user ${user}, database ${db})"
fi

exec "$@"
