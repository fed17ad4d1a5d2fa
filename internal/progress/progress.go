// Package progress defines the progress display that long-running stages
// report to, so that the library code stays free of terminal concerns: the
// CLI passes real bars, tests and quiet runs pass Nop.
package progress

import "context"

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

// stepKey carries a step callback in a context.
type stepKey struct{}

// WithSteps returns a context that carries f, which a long computation
// deep below its caller (a forest's fit, tree by tree) calls with the
// steps it completes: progress crosses the layers between them the way
// net/http/httptrace's hooks do, without a parameter in every signature.
func WithSteps(ctx context.Context, f func(n int)) context.Context {
	return context.WithValue(ctx, stepKey{}, f)
}

// Step reports n completed steps to the callback ctx carries, if any.
func Step(ctx context.Context, n int) {
	if f, ok := ctx.Value(stepKey{}).(func(int)); ok {
		f(n)
	}
}
