package pooler

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

// scramSecret is a SCRAM-SHA-256 verifier.
type scramSecret struct {
	iter                 int
	salt                 []byte
	storedKey, serverKey []byte
}

// parseSCRAMSecret reads SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>.
func parseSCRAMSecret(s string) (scramSecret, error) {
	bad := errors.New("malformed SCRAM-SHA-256 secret")
	parts := strings.Split(s, "$")
	if len(parts) != 3 || parts[0] != "SCRAM-SHA-256" {
		return scramSecret{}, bad
	}
	is, salt64, ok := strings.Cut(parts[1], ":")
	st64, sv64, ok2 := strings.Cut(parts[2], ":")
	if !ok || !ok2 {
		return scramSecret{}, bad
	}
	var sec scramSecret
	var err error
	if sec.iter, err = strconv.Atoi(is); err != nil || sec.iter < 1 {
		return scramSecret{}, bad
	}
	if sec.salt, err = base64.StdEncoding.DecodeString(salt64); err != nil {
		return scramSecret{}, bad
	}
	if sec.storedKey, err = base64.StdEncoding.DecodeString(st64); err != nil || len(sec.storedKey) != sha256.Size {
		return scramSecret{}, bad
	}
	if sec.serverKey, err = base64.StdEncoding.DecodeString(sv64); err != nil || len(sec.serverKey) != sha256.Size {
		return scramSecret{}, bad
	}
	return sec, nil
}

// secretFor builds the verifier of a stored secret (plain passwords get a
// fresh salt).
func secretFor(stored string) (scramSecret, error) {
	if strings.HasPrefix(stored, "SCRAM-SHA-256$") {
		return parseSCRAMSecret(stored)
	}
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	const iter = 4096
	salted, err := pbkdf2.Key(sha256.New, stored, salt, iter, sha256.Size)
	if err != nil {
		return scramSecret{}, err
	}
	ck := hmacSHA256(salted, "Client Key")
	stored2 := sha256.Sum256(ck)
	return scramSecret{iter: iter, salt: salt, storedKey: stored2[:], serverKey: hmacSHA256(salted, "Server Key")}, nil
}

func hmacSHA256(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// isMD5Secret reports whether an auth_file secret is an md5 hash
// ("md5" + md5(password + user) in hex).
func isMD5Secret(s string) bool {
	if len(s) != 35 || !strings.HasPrefix(s, "md5") {
		return false
	}
	_, err := hex.DecodeString(s[3:])
	return err == nil
}

// loginUser is who a client logs in as: its name and stored secret from
// auth_file or auth_query (found), or no secret at all (a user PgBouncer
// would "mock-authenticate": the exchange runs and fails, so the reply does
// not tell whether the user exists).
type loginUser struct {
	name   string
	secret string
	found  bool
}

// authenticate checks the client's credentials as auth_type says, with
// PgBouncer 1.18's rules and refusals. Under md5 a user whose secret is a
// SCRAM secret is asked for SCRAM-SHA-256 instead; under scram-sha-256 a
// user with an md5 secret cannot log in; plain checks a clear-text
// password against any kind of secret. A wrong password or an unknown user
// gets "password authentication failed" (md5, plain) or "SASL
// authentication failed" (scram-sha-256); a user missing from auth_file
// under trust "\"trust\" authentication failed". A SCRAM login against a
// SCRAM secret keeps the keys it proved, so that the server login can use
// them (serverauth.go). auth_type hba takes the method from the first
// matching line of auth_hba_file (hba.go), cert the TLS client
// certificate's name.
func (p *Proxy) authenticate(c *client, db string, u loginUser) error {
	cfg := p.conf()
	method := cfg.AuthType
	if method == AuthHBA {
		method = hbaMethod(*p.auth.hba.Load(), c.remote, c.tlsVersion != 0, db, u.name)
	}
	kind := kindOf(u.secret)
	if method == AuthMD5 && u.found && kind == secretSCRAM {
		method = AuthSCRAM // PgBouncer's finish_set_pool
	}
	if method == AuthMD5 && !u.found && mockAsSCRAM(p.secrets.Load()) {
		method = AuthSCRAM // as most known users are asked (scrammock.go)
	}
	failed := errors.New("password authentication failed")
	switch method {
	case AuthAny:
		return nil
	case AuthReject:
		return errors.New("login rejected")
	case AuthPeer:
		return p.peerLogin(c, u.name, u.found)
	case AuthCert:
		return p.certLogin(c, u)
	case AuthTrust:
		if !u.found && (cfg.AuthFile != "" || cfg.AuthUser != "") {
			return errors.New(`"trust" authentication failed`)
		}
		return nil
	case AuthPlain:
		pw, err := askPassword(c, &pgproto3.AuthenticationCleartextPassword{})
		if err != nil {
			return err
		}
		if pw == "" {
			return errors.New("empty password returned by client")
		}
		if !u.found {
			if mockAsSCRAM(p.secrets.Load()) {
				mockPlainCheck(u.name, pw) // as long as a known user's check (scrammock.go)
			}
			return failed
		}
		if !checkPlain(u.name, pw, u.secret) {
			return failed
		}
		return nil
	case AuthMD5:
		var salt [4]byte
		_, _ = rand.Read(salt[:])
		got, err := askPassword(c, &pgproto3.AuthenticationMD5Password{Salt: salt})
		if err != nil {
			return err
		}
		if got == "" {
			return errors.New("empty password returned by client")
		}
		inner := u.secret
		if kind == secretPlain {
			inner = "md5" + md5hex(u.secret+u.name)
		}
		want := "md5" + md5hex(inner[3:]+string(salt[:]))
		if !u.found || u.secret == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return failed
		}
		return nil
	}
	// PgBouncer 1.18 ends every failed SCRAM exchange (wrong password,
	// unknown user, bad nonce) with "SASL authentication failed".
	saslFailed := errors.New("SASL authentication failed")
	usable := u.found && u.secret != "" && kind != secretMD5
	if u.found && kind == secretMD5 {
		p.clientLogf(c, "SCRAM authentication failed: user has MD5 secret")
	}
	var sec scramSecret
	var err error
	if usable {
		if kind == secretSCRAM {
			sec, err = parseSCRAMSecret(u.secret)
		} else {
			sec, err = plainSecret(u.name, u.secret) // scrammock.go
		}
		usable = err == nil
	}
	if !usable {
		// Run the exchange anyway with the name's mock verifier (stable
		// salt, no derivation: scrammock.go), so that neither the reply nor
		// its timing tells whether the user exists.
		sec = mockSecret(u.name)
	}
	clientKey, err := scramExchange(c.lg.r, c.lg.w, sec)
	if err != nil {
		var ne net.Error
		switch {
		case errors.Is(err, errProtocol), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &ne):
			return err // the exchange broke: "bad packet", or client_login_timeout
		case errors.Is(err, errSASLMechanism):
			return err
		}
		return saslFailed
	}
	if !usable {
		return saslFailed
	}
	if kind == secretSCRAM {
		p.keepSCRAMKeys(u.name, u.secret, scramKeys{clientKey: clientKey, serverKey: sec.serverKey})
	}
	return nil
}

// checkPlain checks a clear-text password against a stored secret of any
// kind (PgBouncer's check_client_passwd for auth_type plain).
func checkPlain(user, pw, secret string) bool {
	if secret == "" {
		return false // PgBouncer refuses empty passwords
	}
	switch kindOf(secret) {
	case secretMD5:
		return subtle.ConstantTimeCompare([]byte("md5"+md5hex(pw+user)), []byte(secret)) == 1
	case secretSCRAM:
		sec, err := parseSCRAMSecret(secret)
		if err != nil {
			return false
		}
		salted, err := pbkdf2.Key(sha256.New, pw, sec.salt, sec.iter, sha256.Size)
		if err != nil {
			return false
		}
		stored := sha256.Sum256(hmacSHA256(salted, "Client Key"))
		return hmac.Equal(stored[:], sec.storedKey)
	}
	return subtle.ConstantTimeCompare([]byte(pw), []byte(secret)) == 1
}

// errSASLMechanism is PgBouncer's text for a SASLInitialResponse that
// names another mechanism than SCRAM-SHA-256.
var errSASLMechanism = errors.New("client selected an invalid SASL authentication mechanism")

// askPassword sends an authentication request and returns the client's
// PasswordMessage.
func askPassword(c *client, req pgproto3.BackendMessage) (string, error) {
	if err := send(c.lg.w, req); err != nil {
		return "", err
	}
	if err := c.lg.w.Flush(); err != nil {
		return "", err
	}
	var scratch []byte
	b, err := readAuthMessage(c.lg.r, &scratch)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(b), "\x00"), nil
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// scramExchange runs the server side of SCRAM-SHA-256 (RFC 5802, RFC 7677)
// without channel binding and returns the ClientKey the client proved.
func scramExchange(r *bufio.Reader, w *bufio.Writer, sec scramSecret) ([]byte, error) {
	if err := send(w, &pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256"}}); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	var scratch []byte
	b, err := readAuthMessage(r, &scratch)
	if err != nil {
		return nil, err
	}
	var init pgproto3.SASLInitialResponse
	if err := init.Decode(b); err != nil {
		return nil, errors.New("scram: bad initial response")
	}
	if init.AuthMechanism != "SCRAM-SHA-256" {
		return nil, errSASLMechanism
	}
	cfm := string(init.Data)
	var gs2 string
	switch {
	case strings.HasPrefix(cfm, "n,,"), strings.HasPrefix(cfm, "y,,"):
		gs2 = cfm[:3]
	default:
		return nil, errors.New("scram: channel binding not supported")
	}
	bare := cfm[3:]
	var clientNonce string
	for _, f := range strings.Split(bare, ",") {
		if v, ok := strings.CutPrefix(f, "r="); ok {
			clientNonce = v
		}
	}
	if clientNonce == "" {
		return nil, errors.New("scram: no client nonce")
	}
	nb := make([]byte, 18)
	_, _ = rand.Read(nb)
	nonce := clientNonce + base64.StdEncoding.EncodeToString(nb)
	sfm := fmt.Sprintf("r=%s,s=%s,i=%d", nonce, base64.StdEncoding.EncodeToString(sec.salt), sec.iter)
	if err := send(w, &pgproto3.AuthenticationSASLContinue{Data: []byte(sfm)}); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	b, err = readAuthMessage(r, &scratch)
	if err != nil {
		return nil, err
	}
	cfinal := string(b) // SASLResponse's body is the data itself
	withoutProof, proof64, ok := strings.Cut(cfinal, ",p=")
	if !ok {
		return nil, errors.New("scram: no proof")
	}
	if withoutProof != "c="+base64.StdEncoding.EncodeToString([]byte(gs2))+",r="+nonce {
		return nil, errors.New("scram: bad channel binding or nonce")
	}
	proof, err := base64.StdEncoding.DecodeString(proof64)
	if err != nil || len(proof) != sha256.Size {
		return nil, errors.New("scram: bad proof")
	}
	authMsg := bare + "," + sfm + "," + withoutProof
	sig := hmacSHA256(sec.storedKey, authMsg)
	ck := make([]byte, sha256.Size)
	subtle.XORBytes(ck, proof, sig)
	got := sha256.Sum256(ck)
	if !hmac.Equal(got[:], sec.storedKey) {
		return nil, errors.New("scram: wrong password")
	}
	v := "v=" + base64.StdEncoding.EncodeToString(hmacSHA256(sec.serverKey, authMsg))
	return ck, send(w, &pgproto3.AuthenticationSASLFinal{Data: []byte(v)})
}

// readAuthMessage reads one 'p' message (password, SASL) and returns a copy
// of its body.
func readAuthMessage(r *bufio.Reader, scratch *[]byte) ([]byte, error) {
	typ, n, err := header(r)
	if err != nil {
		return nil, err
	}
	if typ != msgPassword || n > 64<<10 {
		return nil, fmt.Errorf("%w: expected a password message, got %q", errProtocol, typ)
	}
	b, err := body(r, n, scratch)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(b), nil
}
