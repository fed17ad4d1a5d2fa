package atomicfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Holder is who holds a lock: the host, the process and when it started,
// and the command line, so that a refused writer can say who is in its
// way.
type Holder struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// ProcStart is the process's start time in the kernel's clock ticks
	// since boot (Linux), which tells a live holder from a new process
	// that reuses its PID.
	ProcStart string `json:"proc_start,omitempty"`
	Command   string `json:"command"`
}

func (h Holder) String() string {
	return fmt.Sprintf("host %s, pid %d, since %s (%s)", h.Host, h.PID, h.Started.Format(time.RFC3339), h.Command)
}

// ErrLocked is wrapped by Lock's error when another writer holds the lock.
var ErrLocked = errors.New("locked by another writer")

// LockFile is a held lock: a file created exclusively, holding its
// Holder as JSON. Exclusive creation is atomic on local filesystems and
// on NFS v3 and later, so two writers, on one host or several, never both
// get the lock (docs/reliability.md says what holds where).
type LockFile struct {
	path string
	me   []byte
}

// Lock takes the lock at path. When another process holds it, Lock fails
// at once with ErrLocked, naming the holder, unless the lock is stale: its
// holder ran on this host and is gone (no such PID, or another process
// under it), in which case the lock is taken over. breakLock takes it over
// whoever holds it, for a holder on another host known to be dead.
func Lock(path string, breakLock bool) (*LockFile, error) {
	me := self()
	body, _ := json.Marshal(me)
	for attempt := 0; ; attempt++ {
		err := createWhole(path, append(body, '\n'))
		if err == nil {
			return &LockFile{path: path, me: append(body, '\n')}, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		held, herr := readHolder(path)
		if errors.Is(herr, fs.ErrNotExist) && attempt < 3 {
			continue // released between our create and our read
		}
		stale := herr == nil && held.Host == me.Host && !alive(held)
		if attempt < 3 && (breakLock || stale) {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("lock %s: remove the old lock: %w", path, err)
			}
			continue
		}
		if herr != nil {
			return nil, fmt.Errorf("lock %s is held, and its holder cannot be read (%v): %w; if no lulc writes there, rerun with --break-lock", path, herr, ErrLocked)
		}
		return nil, fmt.Errorf("held by %s: %w; if that process is gone, rerun with --break-lock", held, ErrLocked)
	}
}

// Release removes the lock if it is still this holder's (a --break-lock
// elsewhere may have taken it). It is safe to call more than once.
func (l *LockFile) Release() {
	if l == nil || l.path == "" {
		return
	}
	if body, err := os.ReadFile(l.path); err == nil && string(body) == string(l.me) {
		os.Remove(l.path)
	}
	l.path = ""
}

// lockSuffix is added to an output's path to name its lock.
const lockSuffix = ".lock"

// LockPath is the lock that guards the output at path: a hidden file
// beside it, outside the staging directory, so that it survives the
// staging directory's removal and replacement.
func LockPath(path string) string {
	path = filepath.Clean(path)
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+lockSuffix)
}

// createWhole creates path holding body, failing with fs.ErrExist when
// it exists. The file appears with its whole content (written beside it,
// then hard-linked into place), so that a writer refused by it always
// reads who holds it; where hard links are not supported it is created
// exclusively and then written.
func createWhole(path string, body []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	lerr := os.Link(tmp.Name(), path)
	if lerr == nil || errors.Is(lerr, fs.ErrExist) {
		return lerr
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

func readHolder(path string) (Holder, error) {
	var h Holder
	body, err := os.ReadFile(path)
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return h, fmt.Errorf("not a lulc lock: %w", err)
	}
	return h, nil
}

// self describes this process.
func self() Holder {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return Holder{Host: host, PID: pid, Started: processStart, ProcStart: procStart(pid), Command: strings.Join(os.Args, " ")}
}

var processStart = time.Now().UTC().Truncate(time.Second)

// alive says whether a holder on this host still runs: its PID exists and,
// where the kernel says when processes start, it is the same process.
func alive(h Holder) bool {
	if h.PID <= 0 {
		return false
	}
	if err := syscall.Kill(h.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if h.ProcStart != "" {
		if now := procStart(h.PID); now != "" && now != h.ProcStart {
			return false
		}
	}
	return true
}

// procStart is field 22 of /proc/PID/stat (start time in clock ticks
// since boot), or "" where there is no /proc.
func procStart(pid int) string {
	body, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after its closing parenthesis.
	s := string(body)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // field 22 overall: fields 3… start at f[0]
}
