package pooler

// The SCRAM keys a client proved at login (PgBouncer's scram_ClientKey and
// scram_ServerKey) travel in SHOW FDS's last two columns, so that the new
// process can log in to PostgreSQL for that user with a SCRAM secret from
// auth_file after the servers it took over have closed. This branch keeps
// no such keys: SHOW FDS sends NULL and the keys received are dropped.
// Where the proxy keeps them (Proxy.keepSCRAMKeys, Proxy.scramKeysFor),
// these two read and store them.

// takeoverSCRAMKeys returns the keys proved for user's secret, nil if none.
func (p *Proxy) takeoverSCRAMKeys(user string) (clientKey, serverKey []byte) {
	return nil, nil
}

// takeoverKeepSCRAMKeys stores keys the old process proved for user.
func (p *Proxy) takeoverKeepSCRAMKeys(user string, clientKey, serverKey []byte) {}
