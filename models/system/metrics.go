package system

import (
	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/sim"
)

// Metrics is one run's measurements. The JSON names are fixed (PRODUCT.md,
// "Metrics"); times ending _ms are milliseconds.
type Metrics struct {
	OKTxns       int64   `json:"ok_txns"`
	ConnRefused  int64   `json:"conn_refused"`
	WaitTimeouts int64   `json:"wait_timeouts"`
	WallMs       float64 `json:"wall_ms"`
	TPS          float64 `json:"tps"`
	MeanMs       float64 `json:"mean_ms"`
	P50Ms        float64 `json:"p50_ms"`
	P95Ms        float64 `json:"p95_ms"`
	P99Ms        float64 `json:"p99_ms"`
	WaitMeanMs   float64 `json:"wait_mean_ms"`
	WaitP50Ms    float64 `json:"wait_p50_ms"`
	WaitP99Ms    float64 `json:"wait_p99_ms"`
	WaitProb     float64 `json:"wait_prob"` // fraction of assignments that waited at all (Erlang C's P(wait))
	HopMsPerTxn  float64 `json:"hop_ms_per_txn"`
	ServerUtil   float64 `json:"server_util"`
	// Little's law on the pooler's wait queue over the whole run: the time
	// average of the number waiting (from the queue's own integral), the
	// rate of departures from the queue (assignments and timeouts) per
	// second, and their mean wait in seconds.
	WaitL      float64 `json:"wait_L"`
	WaitLambda float64 `json:"wait_lambda"`
	WaitW      float64 `json:"wait_W"`
	// Accounting: every attempted transaction ends in exactly one of the
	// four other counts.
	AttemptedTxns int64 `json:"attempted_txns"`
	RefusedTxns   int64 `json:"refused_txns"`
	TimedOutTxns  int64 `json:"timed_out_txns"`
	UnfinishedTxn int64 `json:"unfinished_txns"`
	Sessions      int64 `json:"sessions"`
	Assignments   int64 `json:"assignments"`
	WaitMaxLen    int64 `json:"wait_max_len"`
	ServerConns   int64 `json:"server_conns_peak"`
	Events        int64 `json:"events"`
}

// Result is a run's metrics and its mode's feature matrix.
type Result struct {
	Metrics Metrics       `json:"metrics"`
	Compat  compat.Matrix `json:"compat"`
}

func ms(t sim.Time) float64 { return t.Milliseconds() }
