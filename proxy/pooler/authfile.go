package pooler

import (
	"fmt"
	"os"
	"strings"
)

// loadAuthFile reads a PgBouncer auth_file (userlist.txt): one
// `"user" "secret"` per line, `""` escaping a quote inside a field, `;`
// starting a comment line. A secret is a plain password, an md5 hash
// ("md5" + md5(password + user)) or a SCRAM-SHA-256 secret as stored in
// pg_authid; one file may mix them, and which auth_type can check a user
// is decided at that user's login, as in PgBouncer. A line that cannot be
// read is skipped and reported in bad with its line number (PgBouncer logs
// "broken auth file" and stops reading there; the proxy keeps the lines
// that follow). Only a file that cannot be read is an error.
func loadAuthFile(path string) (secrets map[string]string, bad []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("could not open auth_file %s: %w", path, err)
	}
	secrets = map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, ";") {
			continue
		}
		broken := func(why string) {
			bad = append(bad, fmt.Sprintf("broken auth file %s: line %d: %s", path, i+1, why))
		}
		user, rest, ok := quoted(line)
		if !ok {
			broken(`want "user" "secret"`)
			continue
		}
		secret, _, ok := quoted(strings.TrimSpace(rest))
		if !ok {
			broken(fmt.Sprintf("user %q: want a quoted secret after the user name", user))
			continue
		}
		if strings.HasPrefix(secret, "SCRAM-SHA-256$") {
			if _, err := parseSCRAMSecret(secret); err != nil {
				broken(fmt.Sprintf("user %q: %v (want SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>)", user, err))
				continue
			}
		}
		secrets[user] = secret
	}
	return secrets, bad, nil
}

// quoted reads one "..." field with "" as an escaped quote.
func quoted(s string) (field, rest string, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '"' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '"' {
			b.WriteByte('"')
			i++
			continue
		}
		return b.String(), s[i+1:], true
	}
	return "", "", false
}

// secretKind is PgBouncer's password type of a stored secret.
type secretKind uint8

const (
	secretPlain secretKind = iota // a plain password
	secretMD5                     // "md5" + 32 hex digits
	secretSCRAM                   // SCRAM-SHA-256$...
)

// kindOf tells what a stored secret is, as PgBouncer's
// get_password_type does.
func kindOf(secret string) secretKind {
	switch {
	case isMD5Secret(secret):
		return secretMD5
	case strings.HasPrefix(secret, "SCRAM-SHA-256$"):
		if _, err := parseSCRAMSecret(secret); err == nil {
			return secretSCRAM
		}
	}
	return secretPlain
}
