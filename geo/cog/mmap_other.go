//go:build !unix

package cog

// mapTemp falls back to Go memory where files cannot be mapped.
func mapTemp(name string, size int64) ([]byte, error) { return make([]byte, size), nil }

func unmap([]byte) error { return nil }
