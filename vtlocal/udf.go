package vtlocal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// regexp_like for MariaDB, as a UDF.
//
// vttablet's DemotePrimary (PlannedReparentShard, and a primary that finds
// itself replaced) first asks Mysqld.IsSemiSyncBlocked, whose query
//
//	select variable_value from performance_schema.global_status
//	where regexp_like(variable_name, 'Rpl_semi_sync_(source|master)_wait_sessions')
//
// fails on MariaDB, which has no regexp_like(): "FUNCTION regexp_like does
// not exist" (error 1305), and the demotion fails. A stored function does
// not help: the query runs on vttablet's DBA pool, whose connections have
// no default database (the pool is opened before the tablet's database
// name is known), so only a global function resolves — a UDF. It is a few
// lines of C over POSIX regex, compiled with the system's cc into MariaDB's
// plugin directory (vtlocal_regexp_like.so) and registered, outside the
// binlog, on the tablets of a shard that is to be reparented. With
// performance_schema off the query returns no row ("not blocked"), which
// is the truth under durability policy none.
const regexpLikeUDFSource = `
#include <regex.h>
#include <stdlib.h>
#include <string.h>

typedef char my_bool;
enum Item_result { STRING_RESULT = 0, REAL_RESULT, INT_RESULT, ROW_RESULT, DECIMAL_RESULT };
typedef struct UDF_ARGS {
	unsigned int arg_count;
	enum Item_result *arg_type;
	char **args;
	unsigned long *lengths;
	char *maybe_null;
	const char **attributes;
	unsigned long *attribute_lengths;
	void *extension;
} UDF_ARGS;
typedef struct UDF_INIT {
	my_bool maybe_null;
	unsigned int decimals;
	unsigned long max_length;
	char *ptr;
	my_bool const_item;
	void *extension;
} UDF_INIT;

my_bool regexp_like_init(UDF_INIT *init, UDF_ARGS *args, char *message) {
	if (args->arg_count != 2) {
		strcpy(message, "regexp_like(expr, pattern) takes two arguments");
		return 1;
	}
	args->arg_type[0] = STRING_RESULT;
	args->arg_type[1] = STRING_RESULT;
	init->maybe_null = 1;
	return 0;
}

void regexp_like_deinit(UDF_INIT *init) {}

long long regexp_like(UDF_INIT *init, UDF_ARGS *args, char *is_null, char *error) {
	if (args->args[0] == NULL || args->args[1] == NULL) {
		*is_null = 1;
		return 0;
	}
	char *s = strndup(args->args[0], args->lengths[0]);
	char *p = strndup(args->args[1], args->lengths[1]);
	regex_t re;
	long long r = 0;
	if (s == NULL || p == NULL || regcomp(&re, p, REG_EXTENDED | REG_ICASE | REG_NOSUB) != 0) {
		*error = 1;
	} else {
		r = regexec(&re, s, 0, NULL, 0) == 0;
		regfree(&re);
	}
	free(s);
	free(p);
	return r;
}
`

const regexpLikeSO = "vtlocal_regexp_like.so"

// ensureRegexpLike installs and registers the regexp_like UDF on tablet r.
func (c *Cluster) ensureRegexpLike(ctx context.Context, r TabletRecord) error {
	raw, err := c.vtctl(ctx, "ExecuteFetchAsDBA", "--json", r.Alias(),
		"select @@plugin_dir, (select count(*) from mysql.func where name = 'regexp_like')")
	if err != nil {
		return err
	}
	var res struct {
		Rows [][]any `json:"rows"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Rows) != 1 || len(res.Rows[0]) != 2 {
		return fmt.Errorf("plugin dir of %s: %v %s", r.Alias(), err, raw)
	}
	dir, _ := res.Rows[0][0].(string)
	if n := fmt.Sprint(res.Rows[0][1]); n != "0" {
		return nil
	}
	so := filepath.Join(dir, regexpLikeSO)
	if _, err := os.Stat(so); err != nil {
		if err := c.buildRegexpLike(ctx, so); err != nil {
			return err
		}
	}
	if _, err := c.vtctl(ctx, "ExecuteFetchAsDBA", "--disable-binlogs", r.Alias(),
		"CREATE FUNCTION IF NOT EXISTS regexp_like RETURNS INTEGER SONAME '"+regexpLikeSO+"'"); err != nil {
		return fmt.Errorf("registering regexp_like on %s: %w", r.Alias(), err)
	}
	return nil
}

// buildRegexpLike compiles the UDF into so (MariaDB's plugin directory,
// writable by root only).
func (c *Cluster) buildRegexpLike(ctx context.Context, so string) error {
	tmp, err := os.MkdirTemp("", "vtlocal-udf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "regexp_like.c")
	if err := os.WriteFile(src, []byte(regexpLikeUDFSource), 0o644); err != nil {
		return err
	}
	out := filepath.Join(tmp, regexpLikeSO)
	cmd := exec.CommandContext(ctx, "cc", "-O2", "-shared", "-fPIC", "-o", out, src)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return &cmdError{cmd: "cc " + src, err: err, tail: lastLines(b.String(), 20)}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	// Write under a temporary name and rename: a mysqld may be loading
	// the library another cluster installed a moment ago.
	part := so + fmt.Sprintf(".%d", os.Getpid())
	if err := os.WriteFile(part, data, 0o755); err != nil {
		return fmt.Errorf("installing the regexp_like UDF (run as root): %w", err)
	}
	return os.Rename(part, so)
}
