package pooler

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"sync"
)

// SCRAM for users the proxy does not know must not tell them from users it
// does. As PostgreSQL's scram_mock_salt (auth-scram.c) and PgBouncer's
// build_mock_scram_secret: an unknown user gets a salt derived from its
// name and a 32-byte secret nonce made once per process (HMAC-SHA-256 of
// the name keyed with the nonce; PostgreSQL and PgBouncer hash the two
// together), so that two SASL starts for the same name show the same salt
// and PostgreSQL's 4,096 iterations, and no key derivation is done for it,
// so that its SASL start takes as long as a known user's whose secret is a
// stored SCRAM verifier. Its StoredKey and ServerKey are derived from the
// nonce once (precomputed): no proof matches them, and the exchange is
// failed anyway, with the text a wrong password gets ("SASL authentication
// failed", PgBouncer's). As in PgBouncer, and unlike PostgreSQL (whose
// nonce is kept in pg_control), the nonce is new in each process: after a
// restart, or across so_reuseport peers, an unknown user's salt differs.
//
// A known user whose auth_file or auth_query secret is a clear-text
// password gets a verifier built from it (PgBouncer's "ad hoc" secret).
// PgBouncer builds one with a fresh random salt and a 4,096-round
// derivation at every login, which tells such a user from an unknown one
// (a changing salt, a slower start); the proxy salts it as it would an
// unknown user of that name and keeps it (mockKeys.plain), so that the
// salt is stable and only the first login after a start or a password
// change pays the derivation.

// scramSaltLen and scramIterations are PostgreSQL's defaults
// (SCRAM_DEFAULT_SALT_LEN, SCRAM_DEFAULT_ITERATIONS), which PgBouncer uses
// for its mock and ad hoc secrets.
const (
	scramSaltLen    = 16
	scramIterations = 4096
)

// maxPlainVerifiers bounds the verifiers kept for clear-text passwords
// (one per user name); past it they are built again.
const maxPlainVerifiers = 4096

// mockKeys is the per-process secret the mock salts are derived from, and
// the verifiers built for clear-text passwords.
type mockKeys struct {
	nonce                [32]byte // PostgreSQL's mock authentication nonce
	storedKey, serverKey []byte   // the mock verifier's keys

	mu    sync.Mutex
	plain map[string]plainVerifier // by user name
}

// plainVerifier is the verifier built for one user's clear-text password.
type plainVerifier struct {
	password string
	sec      scramSecret
}

// scramMock is made on first use: a process makes one nonce.
var scramMock = sync.OnceValue(func() *mockKeys {
	m := &mockKeys{}
	_, _ = rand.Read(m.nonce[:])
	m.storedKey = hmacSHA256(m.nonce[:], "mock StoredKey")
	m.serverKey = hmacSHA256(m.nonce[:], "mock ServerKey")
	return m
})

// salt is the salt of user name's mock (and clear-text) verifier:
// HMAC-SHA-256 of the name keyed with the process's nonce, cut to
// scramSaltLen bytes.
func (m *mockKeys) salt(user string) []byte {
	return hmacSHA256(m.nonce[:], user)[:scramSaltLen]
}

// mockSecret is the verifier of a user the proxy does not know (or whose
// secret cannot serve SCRAM): its salt is stable, nothing is derived, and
// no proof matches it.
func mockSecret(user string) scramSecret {
	m := scramMock()
	return scramSecret{iter: scramIterations, salt: m.salt(user), storedKey: m.storedKey, serverKey: m.serverKey}
}

// plainSecret is the verifier of user's clear-text password: built with
// the user's stable salt on first use, then kept.
func plainSecret(user, password string) (scramSecret, error) {
	m := scramMock()
	m.mu.Lock()
	v, ok := m.plain[user]
	m.mu.Unlock()
	if ok && v.password == password {
		return v.sec, nil
	}
	salt := m.salt(user)
	salted, err := pbkdf2.Key(sha256.New, password, salt, scramIterations, sha256.Size)
	if err != nil {
		return scramSecret{}, err
	}
	stored := sha256.Sum256(hmacSHA256(salted, "Client Key"))
	sec := scramSecret{iter: scramIterations, salt: salt, storedKey: stored[:], serverKey: hmacSHA256(salted, "Server Key")}
	m.mu.Lock()
	if m.plain == nil || len(m.plain) >= maxPlainVerifiers {
		m.plain = map[string]plainVerifier{}
	}
	m.plain[user] = plainVerifier{password: password, sec: sec}
	m.mu.Unlock()
	return sec, nil
}

// Under auth_type md5 a known user whose secret is a SCRAM verifier is
// asked for SCRAM-SHA-256 (PgBouncer's finish_set_pool), so asking every
// unknown user for md5, as PgBouncer does, tells the two apart. As
// PostgreSQL asks an unknown user for what password_encryption would have
// stored (CheckPWChallengeAuth), the proxy asks an unknown user for what
// most of auth_file's users are asked: SCRAM-SHA-256 when at least half of
// its secrets are SCRAM verifiers, or when it has none (a user auth_query
// finds in PostgreSQL 14 or later has one), else md5.

// mockKind remembers mockAsSCRAM's answer for one auth_file's secrets.
var mockKind struct {
	sync.Mutex
	secrets *map[string]string
	scram   bool
}

// mockAsSCRAM reports whether an unknown user is asked for SCRAM-SHA-256
// under auth_type md5, given auth_file's secrets (counted once per load).
func mockAsSCRAM(secrets *map[string]string) bool {
	mockKind.Lock()
	defer mockKind.Unlock()
	if mockKind.secrets != secrets {
		n := 0
		for _, s := range *secrets {
			if kindOf(s) == secretSCRAM {
				n++
			}
		}
		mockKind.secrets, mockKind.scram = secrets, len(*secrets) == 0 || 2*n >= len(*secrets)
	}
	return mockKind.scram
}

// mockPlainCheck costs what checking a clear-text password against a
// SCRAM verifier costs (a 4,096-round derivation), for an unknown user
// under auth_type plain when most known users' secrets are SCRAM
// verifiers (mockAsSCRAM): checking theirs takes that long, so failing an
// unknown user at once would tell it apart. The answer is always no.
func mockPlainCheck(user, password string) bool {
	_, _ = pbkdf2.Key(sha256.New, password, scramMock().salt(user), scramIterations, sha256.Size)
	return false
}
