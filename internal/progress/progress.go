// Package progress defines the progress display that long-running stages
// report to, so that the library code stays free of terminal concerns: the
// CLI passes real bars, tests and quiet runs pass Nop.
package progress

// Bar receives progress from a stage.
type Bar interface {
	Add(n int) error
	Describe(description string)
	Finish() error
}

// NewBar makes a bar for total units of work.
type NewBar func(total int64, description string) Bar

// Nop is a Bar that shows nothing.
type Nop struct{}

// Add implements Bar.
func (Nop) Add(int) error { return nil }

// Describe implements Bar.
func (Nop) Describe(string) {}

// Finish implements Bar.
func (Nop) Finish() error { return nil }

// OrNop returns f, or a maker of Nop bars when f is nil.
func OrNop(f NewBar) NewBar {
	if f == nil {
		return func(int64, string) Bar { return Nop{} }
	}
	return f
}
