package pooler

import (
	"errors"
	"os"
	osuser "os/user"
	"strconv"
)

// AuthPeer is auth_type peer: a client logs in over the Unix socket only,
// as the OS user its process runs as (SO_PEERCRED), with no password - what
// PgBouncer's auth_hba_file "local ... peer" does (PgBouncer takes peer
// from the HBA file only; the proxy also takes it as auth_type). A TCP
// client is refused.
const AuthPeer = "peer"

// ownConsoleUser is PgBouncer's admin_pre_login: user "pgbouncer" asking
// for the console over the Unix socket, from a process of the proxy's own
// uid, is an admin without a password, whatever admin_users and auth_type
// say. PgBouncer's own test suite reaches its console this way.
func (p *Proxy) ownConsoleUser(c *client, db, user string) bool {
	return db == adminDB && user == adminDB && c.unix && c.tlsVersion == 0 && c.fromOwnUser()
}

// consoleAsOwnUser logs c in to the console as ownConsoleUser allows.
func (p *Proxy) consoleAsOwnUser(c *client, user string) {
	p.clientLogf(c, "pgbouncer access from unix socket")
	p.newCancelKey(c)
	p.admin(c, consoleUser{name: user, role: roleAdmin})
}

// errPeerRejected is PgBouncer's refusal of a peer login.
var errPeerRejected = errors.New("unix socket login rejected")

// peerLogin is PgBouncer's login_as_unix_peer: the client must have come
// over the Unix socket, from a process whose OS user is named user; known
// says the user is in auth_file (PgBouncer refuses a user it does not
// know, when there is an auth_file).
func (p *Proxy) peerLogin(c *client, user string, known bool) error {
	uid, ok := c.peerUser()
	if !c.unix || !ok || (!known && p.conf().AuthFile != "") {
		return errPeerRejected
	}
	u, err := osuser.LookupId(strconv.Itoa(uid))
	if err != nil || u.Username != user {
		return errPeerRejected
	}
	return nil
}

// peerUser is the uid of the process at the other end of c's Unix socket
// (peerUID keeps a uid_t's 32 bits; -1, an invalid uid_t, is unknown).
func (c *client) peerUser() (uid int, ok bool) {
	return int(uint32(c.peerUID)), c.peerUID != -1
}

// fromOwnUser reports whether c came from a process of the proxy's own uid.
func (c *client) fromOwnUser() bool {
	uid, ok := c.peerUser()
	return ok && uid == os.Getuid()
}
