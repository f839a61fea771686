package poolconf

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
)

// ErrSyntax is wrapped by every error about the file's content (as opposed
// to reading it).
var ErrSyntax = errors.New("bad pgbouncer.ini")

// Load reads a pgbouncer.ini over Defaults(). %include lines read another
// file in place (a relative path is taken from the working directory, as
// PgBouncer does). Every error names the file and line.
func Load(path string) (Settings, error) {
	s := Defaults()
	r := reader{s: &s}
	if err := r.file(path, nil); err != nil {
		return Settings{}, err
	}
	if err := s.Validate(); err != nil {
		return Settings{}, fmt.Errorf("%s: %w: %w", path, ErrSyntax, err)
	}
	return s, nil
}

// Parse reads pgbouncer.ini text (named name in errors) over Defaults().
// %include is followed as in Load.
func Parse(name string, text []byte) (Settings, error) {
	s := Defaults()
	r := reader{s: &s}
	if err := r.text(name, text, []string{name}); err != nil {
		return Settings{}, err
	}
	if err := s.Validate(); err != nil {
		return Settings{}, fmt.Errorf("%s: %w: %w", name, ErrSyntax, err)
	}
	return s, nil
}

type reader struct {
	s       *Settings
	section string
}

func (r *reader) file(path string, stack []string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if slices.Contains(stack, abs) {
		return fmt.Errorf("%s: %w: %%include cycle: %s", path, ErrSyntax, strings.Join(append(stack, abs), " -> "))
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	r.s.Files = append(r.s.Files, path)
	return r.text(path, text, append(stack, abs))
}

func (r *reader) text(name string, text []byte, stack []string) error {
	sc := bufio.NewScanner(strings.NewReader(string(text)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSpace(sc.Text())
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s:%d: %w: %s", name, line, ErrSyntax, fmt.Sprintf(format, args...))
		}
		switch {
		case l == "" || l[0] == ';' || l[0] == '#':
			continue
		case strings.HasPrefix(l, "%include"):
			inc := strings.TrimSpace(strings.TrimPrefix(l, "%include"))
			if inc == "" {
				return bad("%%include without a file name")
			}
			if err := r.file(inc, stack); err != nil {
				return fmt.Errorf("%s:%d: %w", name, line, err)
			}
			continue
		case l[0] == '[':
			if !strings.HasSuffix(l, "]") {
				return bad("section header %q has no closing ]", l)
			}
			r.section = strings.ToLower(strings.TrimSpace(l[1 : len(l)-1]))
			switch r.section {
			case "databases", "users", "pgbouncer", "peers":
			default:
				return bad("unknown section [%s]: want [databases], [users], [peers] or [pgbouncer]", r.section)
			}
			continue
		}
		key, value, ok := strings.Cut(l, "=")
		if !ok {
			return bad("%q is not key = value", l)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if key == "" {
			return bad("empty key")
		}
		var err error
		switch r.section {
		case "":
			err = errors.New("key outside a section")
		case "pgbouncer":
			err = r.s.set(strings.ToLower(key), value)
		case "databases":
			err = r.s.addDatabase(unquoteName(key), value)
		case "users":
			err = r.s.addUser(unquoteName(key), value)
		case "peers":
			err = r.s.addPeer(key, value)
		}
		if err != nil {
			return bad("%s: %v", key, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	return nil
}

// unquoteName reads a [databases] or [users] name, which may be written
// in double quotes.
func unquoteName(k string) string {
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		return strings.ReplaceAll(k[1:len(k)-1], `""`, `"`)
	}
	return k
}

// set stores one [pgbouncer] key.
func (s *Settings) set(key, v string) error {
	if _, ok := LookupKey(key); !ok {
		return errors.New("unknown setting (not a PgBouncer 1.18 [pgbouncer] key)")
	}
	if ptr, ok := s.Field(key); ok {
		return parseInto(ptr, v)
	}
	if s.Other == nil {
		s.Other = map[string]string{}
	}
	s.Other[key] = v
	return nil
}

// addDatabase stores one [databases] entry: libpq-style key=value pairs.
func (s *Settings) addDatabase(name, conn string) error {
	if name == "" {
		return errors.New("empty database name")
	}
	d := NewDatabase(name)
	pairs, err := connPairs(conn)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		k, v := kv[0], kv[1]
		num := func(dst *int) {
			if err == nil {
				*dst, err = parseInt(v)
			}
		}
		switch k {
		case "host":
			d.Host = v
		case "port":
			num(&d.Port)
		case "dbname":
			d.DBName = v
		case "user":
			d.User = v
		case "password":
			d.Password = v
		case "auth_user":
			d.AuthUser = v
		case "auth_dbname":
			d.AuthDBName = v
		case "pool_size":
			num(&d.PoolSize)
		case "min_pool_size":
			num(&d.MinPoolSize)
		case "reserve_pool":
			num(&d.ReservePool)
		case "max_db_connections":
			num(&d.MaxDBConnections)
		case "pool_mode":
			if err == nil {
				d.PoolMode, err = parseMode(v)
			}
		case "connect_query":
			d.ConnectQuery = v
		case "client_encoding":
			d.ClientEncoding = v
		case "datestyle":
			d.DateStyle = v
		case "timezone":
			d.TimeZone = v
		default:
			return fmt.Errorf("unknown database option %q: want host, port, dbname, user, password, auth_user, auth_dbname, pool_size, min_pool_size, reserve_pool, max_db_connections, pool_mode, connect_query, client_encoding, datestyle or timezone", k)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	if i := slices.IndexFunc(s.Databases, func(x Database) bool { return x.Name == name }); i >= 0 {
		s.Databases[i] = d // a later entry wins, as in PgBouncer
		return nil
	}
	s.Databases = append(s.Databases, d)
	return nil
}

// addUser stores one [users] entry.
func (s *Settings) addUser(name, conn string) error {
	if name == "" {
		return errors.New("empty user name")
	}
	u := NewUser(name)
	pairs, err := connPairs(conn)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		switch kv[0] {
		case "pool_mode":
			u.PoolMode, err = parseMode(kv[1])
		case "max_user_connections":
			u.MaxUserConnections, err = parseInt(kv[1])
		default:
			return fmt.Errorf("unknown user option %q: want pool_mode or max_user_connections", kv[0])
		}
		if err != nil {
			return fmt.Errorf("%s: %w", kv[0], err)
		}
	}
	if i := slices.IndexFunc(s.Users, func(x User) bool { return x.Name == name }); i >= 0 {
		s.Users[i] = u
		return nil
	}
	s.Users = append(s.Users, u)
	return nil
}

// addPeer stores one [peers] entry (PgBouncer 1.19's parse_peer): the key
// is the peer's id, the value host (required), port and pool_size. A later
// entry for the same id replaces the earlier one.
func (s *Settings) addPeer(name, conn string) error {
	id, err := strconv.Atoi(name)
	if err != nil || id < 1 || id > 65535 {
		return fmt.Errorf("peer id %q: want a number from 1 to 65535", name)
	}
	pe := Peer{ID: id, Port: 6432, PoolSize: Unset}
	pairs, err := connPairs(conn)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		switch kv[0] {
		case "host":
			pe.Host = kv[1]
		case "port":
			pe.Port, err = parseInt(kv[1])
		case "pool_size":
			pe.PoolSize, err = parseInt(kv[1])
		default:
			return fmt.Errorf("unknown peer option %q: want host, port or pool_size", kv[0])
		}
		if err != nil {
			return fmt.Errorf("%s: %w", kv[0], err)
		}
	}
	if pe.Host == "" {
		return fmt.Errorf("host was not provided for peer %d", id)
	}
	i, found := slices.BinarySearchFunc(s.Peers, id, func(p Peer, id int) int { return p.ID - id })
	if found {
		s.Peers[i] = pe
	} else {
		s.Peers = slices.Insert(s.Peers, i, pe)
	}
	return nil
}

// connPairs splits a libpq-style "k=v k2='v 2'" string; in quotes, \' and
// \\ escape.
func connPairs(s string) ([][2]string, error) {
	var out [][2]string
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			return out, nil
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			return nil, fmt.Errorf("%q is not key=value", s[i:])
		}
		key := strings.ToLower(strings.TrimSpace(s[i : i+eq]))
		i += eq + 1
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		var v strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				i++
				if c == '\\' && i < len(s) {
					v.WriteByte(s[i])
					i++
					continue
				}
				if c == '\'' {
					closed = true
					break
				}
				v.WriteByte(c)
			}
			if !closed {
				return nil, fmt.Errorf("%s: unterminated quoted value", key)
			}
		} else {
			for i < len(s) && s[i] != ' ' && s[i] != '\t' {
				v.WriteByte(s[i])
				i++
			}
		}
		if key == "" {
			return nil, errors.New("empty option name")
		}
		out = append(out, [2]string{key, v.String()})
	}
}

func parseInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%q: want a whole number", v)
	}
	return n, nil
}

// parseSeconds reads a duration in seconds (fractions allowed), as
// PgBouncer 1.18 writes its timeouts.
func parseSeconds(v string) (time.Duration, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1e9 {
		return 0, fmt.Errorf("%q: want seconds, such as 15 or 0.5", v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "on", "yes", "true":
		return true, nil
	case "0", "off", "no", "false":
		return false, nil
	}
	return false, fmt.Errorf("%q: want 0 or 1", v)
}

func parseMode(v string) (poolmode.Mode, error) {
	m, err := poolmode.Parse(strings.ToLower(v))
	if err != nil || !m.Pooled() {
		return 0, fmt.Errorf("%q: want session, transaction or statement", v)
	}
	return m, nil
}

// list reads a comma-separated list (admin_users, ignore_startup_parameters).
func list(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
