package pooler

import (
	"reflect"
	"testing"
	"time"
)

// TestUpstreamIgnoresEnvironment: PGCONNECT_TIMEOUT, PGOPTIONS, PGTZ and
// PGAPPNAME do not reach the server connections unless the upstream string
// sets them (PGCONNECT_TIMEOUT=5 used to cut server_connect_timeout to 5 s).
func TestUpstreamIgnoresEnvironment(t *testing.T) {
	t.Setenv("PGCONNECT_TIMEOUT", "5")
	t.Setenv("PGOPTIONS", "-c search_path=evil")
	t.Setenv("PGTZ", "Asia/Tokyo")
	t.Setenv("PGAPPNAME", "from-env")
	t.Setenv("PGPASSWORD", "envpw")
	for _, tc := range []struct {
		upstream                string
		timeout                 time.Duration
		options, tz, app, passw string
	}{
		{"postgres://u@127.0.0.1:5432/db", 0, "", "", "", "envpw"},
		{"host=127.0.0.1 port=5432 user=u", 0, "", "", "", "envpw"},
		{"postgres://u:pw@127.0.0.1:5432/db?connect_timeout=7&options=-c%20a%3Db&application_name=mine", 7 * time.Second, "-c a=b", "", "mine", "pw"},
		{"host=127.0.0.1 connect_timeout = 3 timezone='UTC' password=x", 3 * time.Second, "", "UTC", "", "x"},
	} {
		conf, err := parseUpstream(tc.upstream)
		if err != nil {
			t.Fatalf("%s: %v", tc.upstream, err)
		}
		got := []any{conf.ConnectTimeout, conf.RuntimeParams["options"], conf.RuntimeParams["timezone"], conf.RuntimeParams["application_name"], conf.Password}
		want := []any{tc.timeout, tc.options, tc.tz, tc.app, tc.passw}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: connect_timeout, options, timezone, application_name, password = %v, want %v", tc.upstream, got, want)
		}
	}
	if got := UpstreamEnvApplied("postgres://u@127.0.0.1:5432/db"); !reflect.DeepEqual(got, []string{"PGPASSWORD"}) {
		t.Errorf("UpstreamEnvApplied = %v, want [PGPASSWORD]", got)
	}
	if got := UpstreamEnvApplied("postgres://u:pw@127.0.0.1:5432/db"); len(got) != 0 {
		t.Errorf("UpstreamEnvApplied with a password in the URL = %v, want none", got)
	}
}
