package pooler

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolconf"
)

// The server login as PgBouncer does it: with the password of the
// [databases] entry, else with the client's own credentials from auth_file
// (or auth_query) - a plain password answers any method, an md5 hash
// answers md5 (md5(hash without "md5" + salt)), a SCRAM secret answers
// SCRAM-SHA-256 with the ClientKey and ServerKey that a client of the user
// proved in its own SCRAM login. pgconn cannot log in with a hash or a
// ClientKey, so the proxy runs the authentication exchange itself on the
// connection pgconn opened (after TLS, in its AfterNetConnect hook) and
// hands pgconn the rest of the start-up (ParameterStatus, BackendKeyData,
// ReadyForQuery) as if the server had accepted it at once.

// scramKeys are the keys a client's SCRAM login proved for a SCRAM secret
// (PgBouncer's scram_ClientKey and scram_ServerKey).
type scramKeys struct{ clientKey, serverKey []byte }

// authState is what the proxy learns at client logins for server logins:
// the SCRAM keys by user and secret, and the secrets auth_query found by
// database and user.
type authState struct {
	keys    sync.Map // user + "\x00" + secret -> scramKeys
	mu      sync.Mutex
	queried map[[2]string]string      // (database, user) -> secret from auth_query
	hba     atomic.Pointer[[]hbaRule] // auth_hba_file's rules (hba.go)
	conns   authConns                 // idle auth_query connections (authquery.go)
}

// keepSCRAMKeys records the keys a client proved for user's SCRAM secret.
func (p *Proxy) keepSCRAMKeys(user, secret string, k scramKeys) {
	p.auth.keys.Store(user+"\x00"+secret, k)
}

// scramKeysFor returns the keys proved for user's secret, if any.
func (p *Proxy) scramKeysFor(user, secret string) (scramKeys, bool) {
	v, ok := p.auth.keys.Load(user + "\x00" + secret)
	if !ok {
		return scramKeys{}, false
	}
	return v.(scramKeys), true
}

// keepQueried records the secret auth_query returned for user of db.
func (p *Proxy) keepQueried(db, user, secret string) {
	p.auth.mu.Lock()
	defer p.auth.mu.Unlock()
	if p.auth.queried == nil {
		p.auth.queried = map[[2]string]string{}
	}
	p.auth.queried[[2]string{db, user}] = secret
}

// userSecret is the stored secret of user for a server login to database
// db: auth_file's, else what auth_query found for db.
func (p *Proxy) userSecret(db, user string) string {
	if s, ok := (*p.secrets.Load())[user]; ok {
		return s
	}
	p.auth.mu.Lock()
	defer p.auth.mu.Unlock()
	return p.auth.queried[[2]string{db, user}]
}

// useServerLogin makes conf (the server login of database entry ent as
// user) log in as PgBouncer does: with ent's password for a forced user
// that has one, else with the user's secret from auth_file or auth_query.
// The upstream URL's own password, when it has one, is left to pgconn.
func (p *Proxy) useServerLogin(conf *pgconn.Config, ent poolconf.Database) {
	if ent.Host == upstreamHost && conf.Password != "" {
		return
	}
	fixed, hasFixed := "", false
	if ent.User != "" && ent.Password != "" {
		fixed, hasFixed = ent.Password, true
	}
	db := ent.Name
	conf.AfterNetConnect = func(ctx context.Context, cfg *pgconn.Config, conn net.Conn) (net.Conn, error) {
		secret := fixed
		if !hasFixed {
			secret = p.userSecret(db, cfg.User)
		}
		cred := serverCred{user: cfg.User, secret: secret}
		if kindOf(secret) == secretSCRAM {
			cred.keys, cred.hasKeys = p.scramKeysFor(cfg.User, secret)
		}
		lc, err := p.serverLogin(ctx, cfg, conn, cred)
		if err != nil {
			return conn, err // pgconn closes the connection it returns
		}
		return lc, nil
	}
}

// fdAuth is SHOW FDS' password, scram_client_key and scram_server_key
// of a connection of pool pl, what a new process needs to log the pool's
// user in to the server after an online restart (PgBouncer's
// show_one_fd): the secret auth_query found for a user not in auth_file,
// and the SCRAM keys a client proved for the user's secret; NULL for none.
func (p *Proxy) fdAuth(pl *pool) []any {
	out := []any{nil, nil, nil}
	if pl == nil {
		return out
	}
	db, user := pl.key.db, pl.key.user
	secret := p.userSecret(db, user)
	if _, inFile := (*p.secrets.Load())[user]; !inFile && secret != "" {
		out[0] = secret
	}
	if k, ok := p.scramKeysFor(user, secret); ok {
		out[1], out[2] = k.clientKey, k.serverKey
	}
	return out
}

// takeOverAuth is the other side of fdAuth, for an online restart: what
// the old process listed for a connection of user to database db (its
// SHOW FDS password, scram_client_key and scram_server_key) is kept as if
// this process had seen the login; empty values add nothing.
func (p *Proxy) takeOverAuth(db, user, password string, clientKey, serverKey []byte) {
	if password != "" {
		p.keepQueried(db, user, password)
	}
	if len(clientKey) == sha256.Size && len(serverKey) == sha256.Size {
		p.keepSCRAMKeys(user, p.userSecret(db, user), scramKeys{clientKey: clientKey, serverKey: serverKey})
	}
}

// serverCred is what a server login answers authentication requests with.
type serverCred struct {
	user    string
	secret  string // plain password, md5 hash or SCRAM secret; "" = none
	keys    scramKeys
	hasKeys bool
}

// serverLoginError is PgBouncer's kill_pool_logins text ("server login
// failed: ...") for a login the proxy gives up, e.g. when the
// stored secret cannot answer the server's method: as a server error, every
// client waiting for the pool gets it at once.
func serverLoginError(msg string) *pgconn.PgError {
	return &pgconn.PgError{Severity: "FATAL", Code: "08P01", Message: "server login failed: " + msg}
}

// serverLogin sends the StartupMessage and answers the server's
// authentication requests until AuthenticationOk; it returns conn wrapped
// so that pgconn sees AuthenticationOk at once and reads the rest of the
// start-up itself. The exchange is bounded by ctx.
func (p *Proxy) serverLogin(ctx context.Context, cfg *pgconn.Config, conn net.Conn, cred serverCred) (net.Conn, error) {
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	params := map[string]string{}
	for k, v := range cfg.RuntimeParams {
		params[k] = v
	}
	params["user"] = cfg.User
	if cfg.Database != "" {
		params["database"] = cfg.Database
	}
	sm, _ := (&pgproto3.StartupMessage{ProtocolVersion: protocol30, Parameters: params}).Encode(nil)
	if _, err := conn.Write(sm); err != nil {
		return nil, fmt.Errorf("send startup message: %w", err)
	}
	br := bufio.NewReaderSize(conn, 4096)
	if err := p.answerAuth(br, conn, cfg, cred); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return nil, err
	}
	if !stop() {
		return nil, ctx.Err()
	}
	_ = conn.SetDeadline(time.Time{})
	ok, _ := (&pgproto3.AuthenticationOk{}).Encode(nil)
	return &loggedInConn{Conn: conn, pending: bytes.NewReader(ok), br: br, skip: -1}, nil
}

// answerAuth runs the authentication exchange (PgBouncer's answer_authreq).
func (p *Proxy) answerAuth(br *bufio.Reader, w io.Writer, cfg *pgconn.Config, cred serverCred) error {
	var scratch []byte
	var sc *scramClient
	logf := func(format string, args ...any) {
		p.logf("S-login: %s/%s@%s:%d %s", cfg.Database, cfg.User, cfg.Host, cfg.Port, fmt.Sprintf(format, args...))
	}
	kind := kindOf(cred.secret)
	for {
		typ, n, err := header(br)
		if err != nil {
			return fmt.Errorf("read server login reply: %w", err)
		}
		b, err := body(br, n, &scratch)
		if err != nil {
			return fmt.Errorf("read server login reply: %w", err)
		}
		switch typ {
		case msgErrorResponse:
			var e pgproto3.ErrorResponse
			if err := e.Decode(b); err != nil {
				return fmt.Errorf("%w: bad ErrorResponse at server login", errProtocol)
			}
			return pgconn.ErrorResponseToPgError(&e)
		case msgNoticeResponse, 'v': // NegotiateProtocolVersion: nothing asked for
			continue
		case 'R':
		default:
			return fmt.Errorf("%w: server sent %q during login", errProtocol, typ)
		}
		if len(b) < 4 {
			return fmt.Errorf("%w: short authentication request", errProtocol)
		}
		var reply []byte
		switch code := binary.BigEndian.Uint32(b); code {
		case 0: // AuthenticationOk
			return nil
		case 3: // clear text: PgBouncer sends the stored secret as it is
			reply, _ = (&pgproto3.PasswordMessage{Password: cred.secret}).Encode(nil)
		case 5: // md5
			if len(b) < 8 {
				return fmt.Errorf("%w: short md5 request", errProtocol)
			}
			var inner string
			switch kind {
			case secretPlain:
				inner = md5hex(cred.secret + cred.user)
			case secretMD5:
				inner = cred.secret[3:]
			default:
				logf("cannot do MD5 authentication: wrong password type")
				return serverLoginError("wrong password type")
			}
			reply, _ = (&pgproto3.PasswordMessage{Password: "md5" + md5hex(inner+string(b[4:8]))}).Encode(nil)
		case 10: // SASL
			var mechs pgproto3.AuthenticationSASL
			if err := mechs.Decode(b); err != nil || !containsString(mechs.AuthMechanisms, "SCRAM-SHA-256") {
				logf("none of the server's SASL authentication mechanisms are supported")
				return serverLoginError("none of the server's SASL authentication mechanisms are supported")
			}
			switch {
			case kind == secretPlain:
			case kind == secretSCRAM && cred.hasKeys:
			case kind == secretSCRAM:
				logf("cannot do SCRAM authentication: password is SCRAM secret but client authentication did not provide SCRAM keys")
				return serverLoginError("wrong password type")
			default:
				logf("cannot do SCRAM authentication: wrong password type")
				return serverLoginError("wrong password type")
			}
			if sc != nil {
				return fmt.Errorf("%w: duplicate AuthenticationSASL message from server", errProtocol)
			}
			sc = newSCRAMClient(cred)
			reply, _ = (&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte(sc.first())}).Encode(nil)
		case 11: // SASLContinue
			if sc == nil {
				return fmt.Errorf("%w: AuthenticationSASLContinue without prior AuthenticationSASL", errProtocol)
			}
			final, err := sc.final(string(b[4:]))
			if err != nil {
				return err
			}
			reply, _ = (&pgproto3.SASLResponse{Data: []byte(final)}).Encode(nil)
		case 12: // SASLFinal
			if sc == nil || sc.serverSig == nil {
				return fmt.Errorf("%w: AuthenticationSASLFinal without prior AuthenticationSASLContinue", errProtocol)
			}
			v, ok := strings.CutPrefix(string(b[4:]), "v=")
			got, err := base64.StdEncoding.DecodeString(v)
			if !ok || err != nil || !hmac.Equal(got, sc.serverSig) {
				logf("invalid server signature")
				return serverLoginError("invalid server signature")
			}
			continue
		default:
			logf("unknown/unsupported auth method: %d", code)
			return serverLoginError("unsupported auth method " + strconv.Itoa(int(code)))
		}
		if _, err := w.Write(reply); err != nil {
			return fmt.Errorf("send server login reply: %w", err)
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scramClient is the client side of SCRAM-SHA-256 without channel
// binding, as PgBouncer runs it against the server.
type scramClient struct {
	cred      serverCred
	nonce     string
	bare      string // client-first-message-bare
	serverSig []byte // expected ServerSignature, once known
}

func newSCRAMClient(cred serverCred) *scramClient {
	nb := make([]byte, 18)
	_, _ = rand.Read(nb)
	return &scramClient{cred: cred, nonce: base64.StdEncoding.EncodeToString(nb)}
}

// first is the client-first-message (the user name is empty: the server
// takes the start-up packet's, as with libpq).
func (s *scramClient) first() string {
	s.bare = "n=,r=" + s.nonce
	return "n,," + s.bare
}

// final answers the server-first-message with the client-final-message.
func (s *scramClient) final(serverFirst string) (string, error) {
	var nonce, salt64, iters string
	for _, f := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(f, "r="):
			nonce = f[2:]
		case strings.HasPrefix(f, "s="):
			salt64 = f[2:]
		case strings.HasPrefix(f, "i="):
			iters = f[2:]
		}
	}
	salt, err := base64.StdEncoding.DecodeString(salt64)
	iter, err2 := strconv.Atoi(iters)
	if !strings.HasPrefix(nonce, s.nonce) || len(nonce) == len(s.nonce) || err != nil || err2 != nil || iter < 1 {
		return "", fmt.Errorf("%w: bad SCRAM server-first-message", errProtocol)
	}
	clientKey, serverKey := s.cred.keys.clientKey, s.cred.keys.serverKey
	if kindOf(s.cred.secret) == secretPlain {
		salted, err := pbkdf2.Key(sha256.New, s.cred.secret, salt, iter, sha256.Size)
		if err != nil {
			return "", fmt.Errorf("scram: %w", err)
		}
		clientKey, serverKey = hmacSHA256(salted, "Client Key"), hmacSHA256(salted, "Server Key")
	}
	withoutProof := "c=biws,r=" + nonce
	authMsg := s.bare + "," + serverFirst + "," + withoutProof
	storedKey := sha256.Sum256(clientKey)
	proof := make([]byte, sha256.Size)
	subtle.XORBytes(proof, clientKey, hmacSHA256(storedKey[:], authMsg))
	s.serverSig = hmacSHA256(serverKey, authMsg)
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), nil
}

// loggedInConn is a server connection whose authentication the proxy did:
// pgconn's StartupMessage is dropped, and pgconn reads AuthenticationOk
// first, then what the server sends next.
type loggedInConn struct {
	net.Conn
	pending *bytes.Reader // AuthenticationOk
	br      *bufio.Reader // the server's bytes read past the exchange
	skip    int           // bytes of pgconn's StartupMessage still to drop; -1 before its length is known
	head    []byte
}

func (c *loggedInConn) Read(b []byte) (int, error) {
	if c.pending.Len() > 0 {
		return c.pending.Read(b)
	}
	return c.br.Read(b)
}

func (c *loggedInConn) Write(b []byte) (int, error) {
	n := 0
	for c.skip != 0 && len(b) > 0 {
		if c.skip < 0 {
			k := min(4-len(c.head), len(b))
			c.head = append(c.head, b[:k]...)
			b, n = b[k:], n+k
			if len(c.head) == 4 {
				c.skip = max(int(binary.BigEndian.Uint32(c.head))-4, 0)
			}
			continue
		}
		k := min(c.skip, len(b))
		b, n, c.skip = b[k:], n+k, c.skip-k
	}
	if len(b) == 0 {
		return n, nil
	}
	m, err := c.Conn.Write(b)
	return n + m, err
}

// serverConnOf returns the connection under a pgconn-hijacked server
// connection: the network (or TLS) connection itself when the proxy did
// the login. Nothing may be left buffered.
func serverConnOf(conn net.Conn) (net.Conn, error) {
	lc, ok := conn.(*loggedInConn)
	if !ok {
		return conn, nil
	}
	if lc.pending.Len() > 0 || lc.br.Buffered() > 0 {
		return nil, errors.New("server sent data past ReadyForQuery at login")
	}
	return lc.Conn, nil
}
