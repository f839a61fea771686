package proxy

import (
	"encoding/base64"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

func asPgError(err error, pe **pgconn.PgError) bool { return errors.As(err, pe) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
