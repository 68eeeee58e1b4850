package server

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// definer declares flags whose defaults come from the environment, and
// remembers which were set there so that the config file does not
// override them.
type definer struct {
	fs      *flag.FlagSet
	getenv  func(string) string
	fromEnv map[string]bool
	envErr  error
}

// env returns the flag's environment value, noting that it was set.
func (d *definer) env(name string) (string, bool) {
	v := d.getenv(envName(name))
	if v == "" {
		return "", false
	}
	if d.fromEnv == nil {
		d.fromEnv = map[string]bool{}
	}
	d.fromEnv[name] = true
	return v, true
}

func (d *definer) usage(name, usage string) string { return usage + " (env " + envName(name) + ")" }

func (d *definer) str(p *string, name, def, usage string) {
	if v, ok := d.env(name); ok {
		def = v
	}
	d.fs.StringVar(p, name, def, d.usage(name, usage))
}

func (d *definer) dur(p *time.Duration, name string, def time.Duration, usage string) {
	d.fs.DurationVar(p, name, def, d.usage(name, usage))
	d.fromEnvSet(name)
}

func (d *definer) boolean(p *bool, name string, def bool, usage string) {
	d.fs.BoolVar(p, name, def, d.usage(name, usage))
	d.fromEnvSet(name)
}

func (d *definer) integer(p *int, name string, def int, usage string) {
	d.fs.IntVar(p, name, def, d.usage(name, usage))
	d.fromEnvSet(name)
}

func (d *definer) int64(p *int64, name string, def int64, usage string) {
	d.fs.Int64Var(p, name, def, d.usage(name, usage))
	d.fromEnvSet(name)
}

func (d *definer) float(p *float64, name string, def float64, usage string) {
	d.fs.Float64Var(p, name, def, d.usage(name, usage))
	d.fromEnvSet(name)
}

// list declares a repeatable flag; its environment variable is
// comma-separated.
func (d *definer) list(p *[]string, name, usage string) {
	d.fs.Var(&stringList{p: p}, name, d.usage(name, usage))
	d.fromEnvSet(name)
}

// urls declares a repeatable flag of addresses whose environment variable
// is one value: addresses such as redis+cluster://h1:p1,h2:p2 contain
// commas themselves.
func (d *definer) urls(p *[]string, name, usage string) {
	d.fs.Var(&stringList{p: p, whole: true}, name, d.usage(name, usage))
	d.fromEnvSet(name)
}

// fromEnvSet applies the environment value through the flag's own parser,
// so a malformed VSG_* value is an error rather than silently ignored.
func (d *definer) fromEnvSet(name string) {
	v, ok := d.env(name)
	if !ok {
		return
	}
	f := d.fs.Lookup(name)
	if l, isList := f.Value.(*stringList); isList && !l.whole {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				f.Value.Set(part)
			}
		}
		return
	}
	if err := f.Value.Set(v); err != nil && d.envErr == nil {
		d.envErr = fmt.Errorf("%w: %s=%q: %v", ErrConfig, envName(name), v, err)
	}
}

// loadFile applies the --config file (found in args or VSG_CONFIG) to the
// flags not set in the environment. Unknown keys are errors: a typo in a
// security setting must not pass silently.
func (d *definer) loadFile(args []string) error {
	if d.envErr != nil {
		return d.envErr
	}
	path := configPath(args, d.getenv)
	if path == "" {
		return nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	var m map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	for key, val := range m {
		f := d.fs.Lookup(key)
		if f == nil || key == "config" {
			return fmt.Errorf("%w: %s: unknown key %q (keys are flag names, like data-dir)", ErrConfig, path, key)
		}
		if d.fromEnv[key] {
			continue
		}
		vals, ok := val.([]any)
		if !ok {
			vals = []any{val}
		}
		if _, isList := f.Value.(*stringList); !isList && len(vals) != 1 {
			return fmt.Errorf("%w: %s: %s takes one value", ErrConfig, path, key)
		}
		for _, v := range vals {
			s, err := scalar(v)
			if err != nil {
				return fmt.Errorf("%w: %s: %s: %v", ErrConfig, path, key, err)
			}
			if err := f.Value.Set(s); err != nil {
				return fmt.Errorf("%w: %s: %s=%q: %v", ErrConfig, path, key, s, err)
			}
		}
	}
	return nil
}

func scalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	default:
		return "", fmt.Errorf("unsupported value %v", v)
	}
}

// configPath finds --config before the flags are parsed (the file sets
// their defaults).
func configPath(args []string, getenv func(string) string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		for _, p := range []string{"--config", "-config"} {
			if a == p && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v
			}
		}
	}
	return getenv(envName("config"))
}

// stringList is a repeatable string flag. Once the command line is being
// parsed (fresh), its first Set replaces what the environment or the file
// gave, so the command line wins rather than adding to them.
type stringList struct {
	p     *[]string
	fresh bool
	whole bool // the environment value is one element, not comma-separated
}

func (l *stringList) String() string {
	if l == nil || l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l *stringList) Set(s string) error {
	if l.fresh {
		*l.p, l.fresh = nil, false
	}
	*l.p = append(*l.p, s)
	return nil
}

// commandLine marks every list flag fresh, before fs.Parse.
func (d *definer) commandLine() {
	d.fs.VisitAll(func(f *flag.Flag) {
		if l, ok := f.Value.(*stringList); ok {
			l.fresh = true
		}
	})
}
