#!/usr/bin/env bash
# An nginx configuration that spreads OpenAI API requests over several
# `smallmind serve` processes (on one machine or many), least busy first,
# with streamed responses passed through as they come.
#
#   scripts/nginx_balance.sh PORT HOST:PORT... > smallmind-nginx.conf
#   nginx -p "$PWD" -c smallmind-nginx.conf -g 'daemon off;'
#
# Each backend is a server started with `smallmind serve --host ADDR --port N`;
# clients use http://THIS-HOST:PORT/v1 as their base URL. Runs as any user
# (its files go under the -p prefix).
set -eu
[ $# -ge 2 ] || { echo "usage: $0 PORT HOST:PORT..." >&2; exit 2; }
port=$1; shift
cat <<CONF
worker_processes 1;
error_log stderr warn;
pid nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path body;
    proxy_temp_path proxy;
    fastcgi_temp_path fastcgi;
    uwsgi_temp_path uwsgi;
    scgi_temp_path scgi;
    client_max_body_size 4m;
    upstream smallmind {
        least_conn;
$(for b in "$@"; do echo "        server $b max_fails=1 fail_timeout=5s;"; done)
        keepalive 32;
    }
    server {
        listen 127.0.0.1:$port;
        location / {
            proxy_pass http://smallmind;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;          # server-sent events as they come
            proxy_read_timeout 3600s;     # a long completion
            proxy_next_upstream error timeout http_503;
        }
    }
}
CONF
