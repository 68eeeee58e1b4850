# Varnish in front of vstream-gateway, as a CDN would be (README: "Behind a
# cache"): pull pages are looked up and kept as the gateway's Cache-Control
# says (run the gateway with --pull-cache); identical requests in flight are
# collapsed into one (Varnish's waiting list), which is what turns N
# long-pollers at the live end into one request per page. Everything else
# passes through. The end-to-end tests run this file (e2e/cache_test.go),
# with the backend's port replaced.
vcl 4.1;

import std;

backend gateway {
    .host = "127.0.0.1";
    .port = "8080";
    # A long-poll holds its request up to the gateway's --max-wait (60 s).
    .first_byte_timeout = 75s;
    .between_bytes_timeout = 75s;
}

sub vcl_recv {
    if (req.http.Upgrade ~ "(?i)websocket") {
        return (pipe);
    }
    if (req.method != "GET" && req.method != "HEAD") {
        return (pass);
    }
    if (req.url !~ "^/v1/streams/[^/?]+/changes(\?|$)") {
        # SSE, the admin API, /metrics: never kept by the gateway's
        # headers, passed without waiting on each other.
        return (pass);
    }
    # The format is the one request header a page's bytes depend on
    # (Vary: Accept): two values, so that every client shares the entry.
    if (req.http.Accept ~ "application/x-ndjson") {
        set req.http.Accept = "application/x-ndjson";
    } else {
        unset req.http.Accept;
    }
    # Looked up even with an Authorization header (the built-in VCL passes
    # those): the gateway makes a page public only when its URL names the
    # token's scope (scope=), or with authentication off. The cache does
    # not check tokens: see README.
    return (hash);
}

sub vcl_pipe {
    if (req.http.Upgrade) {
        set bereq.http.Upgrade = req.http.Upgrade;
        set bereq.http.Connection = req.http.Connection;
    }
}

sub vcl_backend_response {
    # The 409 resume_impossible the gateway marks public names a restart
    # URL and never changes; Varnish keeps no 409 unless told to.
    if (beresp.status == 409 && beresp.http.Cache-Control ~ "public" && beresp.http.Cache-Control ~ "max-age=[0-9]+") {
        set beresp.ttl = std.duration(regsub(beresp.http.Cache-Control, "^.*max-age=([0-9]+).*$", "\1s"), 0s);
        set beresp.grace = 0s;
        return (deliver);
    }
}
