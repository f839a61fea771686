package sim

// Resource is c identical units (servers, workers, slots) with a FIFO
// queue for requests that find them all busy. It measures its busy units
// and its queue over virtual time, so utilisation and the queue's L, λ and
// W come from its own accounts.
type Resource struct {
	capacity int
	busy     Level
	queue    *FIFO
}

// NewResource returns a resource of capacity units whose statistics start
// at time start; capacity must be at least 1.
func NewResource(start Time, capacity int) *Resource {
	if capacity < 1 {
		panic("sim: resource capacity must be at least 1")
	}
	return &Resource{capacity: capacity, busy: NewLevel(start), queue: NewFIFO(start)}
}

// Acquire asks for one unit for id at time now. It reports true when the
// unit is granted at once; otherwise id waits in FIFO order and will be
// returned by a later Release.
func (r *Resource) Acquire(now Time, id int32) bool {
	if r.busy.Value() < int64(r.capacity) && r.queue.Len() == 0 {
		r.busy.Add(now, 1)
		return true
	}
	r.queue.Push(now, id)
	return false
}

// Release frees one unit at time now. When a request is waiting the unit
// passes straight to it, and its id is returned with ok true.
func (r *Resource) Release(now Time) (next int32, ok bool) {
	if id, _, ok := r.queue.Pop(now); ok {
		return id, true // the unit changes hands; busy stays the same
	}
	if r.busy.Value() == 0 {
		panic("sim: release of a resource with no busy unit")
	}
	r.busy.Add(now, -1)
	return 0, false
}

// Busy is the number of units in use.
func (r *Resource) Busy() int { return int(r.busy.Value()) }

// Capacity is the number of units.
func (r *Resource) Capacity() int { return r.capacity }

// Utilisation is the time-average fraction of units in use up to end.
func (r *Resource) Utilisation(end Time) float64 {
	return r.busy.Mean(end) / float64(r.capacity)
}

// Queue is the resource's wait queue (for its Little's-law accounts).
func (r *Resource) Queue() *FIFO { return r.queue }
