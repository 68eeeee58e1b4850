package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/vstream-gateway/vstream-gateway/auth"
)

// tokenCmd implements `vstream-gateway token`: it mints an HS256 token for
// the local demo and for scripts against a gateway configured with
// --jwt-secret. Production tokens come from the identity provider.
func tokenCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vstream-gateway token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	secret := fs.String("secret", getenv("VSG_JWT_SECRET"), "HS256 secret (default: the first of VSG_JWT_SECRET)")
	sub := fs.String("sub", "demo", "subject; subscriber names are bound to it")
	streams := fs.String("streams", "*", "comma-separated stream-name globs")
	tables := fs.String("tables", "*", "comma-separated keyspace.table globs")
	scope := fs.String("scope", "", "space-separated scopes, e.g. admin")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime")
	aud := fs.String("aud", getenv("VSG_JWT_AUDIENCE"), "audience claim")
	iss := fs.String("iss", getenv("VSG_JWT_ISSUER"), "issuer claim")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	key, _, _ := strings.Cut(*secret, ",")
	c := auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: *sub, Issuer: *iss},
		Streams:          split(*streams),
		Tables:           split(*tables),
		Scope:            *scope,
	}
	if *aud != "" {
		c.Audience = jwt.ClaimStrings{*aud}
	}
	tok, err := auth.MintHS256([]byte(key), c, *ttl)
	if err != nil {
		fmt.Fprintln(stderr, "vstream-gateway token:", err)
		return 1
	}
	fmt.Fprintln(stdout, tok)
	return 0
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func runToken() {
	os.Exit(tokenCmd(os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
}
