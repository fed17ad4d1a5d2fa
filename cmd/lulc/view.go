package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/report/view"
)

// defaultViewPort is lulc view's port unless --port says otherwise.
const defaultViewPort = 8765

func newViewCmd(a *app) *cobra.Command {
	var (
		port      int
		host      string
		labels    string
		noBrowser bool
	)
	cmd := &cobra.Command{
		Use:   "view DIR",
		Short: "Look at a run's maps in a browser: classes, confidence, area of applicability, labels",
		Long: `view serves the maps in DIR, a lulc run or lulc predict output directory (one
directory per tile, or one tile's directory), to a browser on this machine and opens
the page (--no-browser: only print its address). The page shows each tile's class map
with the scheme's legend, the top class's confidence, the pixels outside the area of
applicability, and the reference labels when the run kept its stack (labels.tif in a
tile's directory) or --labels names a raster on a tile's grid; toggle them, or show the
labels beside the map. Click a pixel: its class, confidence, dissimilarity index and
label, read from the COGs. Several tiles: pick one, or all of one projection.

The page and its script (OpenLayers and geotiff.js, bundled in the binary) need nothing
from the internet. The server binds 127.0.0.1 (--host widens it) and serves the page and
the tiles' files only, with ranges so that the COGs stream. On a remote machine, tunnel
the port: ssh -L PORT:127.0.0.1:PORT HOST, then open http://127.0.0.1:PORT/ locally.
It serves until interrupted (Ctrl-C). docs/view.md says more.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return usagef("%v: give the run's output directory", err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 0 || port > 65535 {
				return usagef("--port %d: a port is 0 (any free port) to 65535", port)
			}
			run, err := view.Discover(args[0])
			if errors.Is(err, view.ErrNoRun) || errors.Is(err, fs.ErrNotExist) {
				return usageError{err}
			} else if err != nil {
				return err
			}
			if labels != "" {
				tile, err := labelsTile(run, labels)
				if err != nil {
					return err
				}
				if err := run.SetLabels(tile, labels); err != nil {
					return err
				}
			}
			srv, err := view.Listen(run, host, port)
			if errors.Is(err, syscall.EADDRINUSE) {
				return usagef("%v: give another with --port N, or --port 0 for any free port", err)
			} else if err != nil {
				return err
			}
			if !srv.Addr().IP.IsLoopback() {
				a.log.Warn("lulc view answers every machine that reaches this port: the run's maps are open to them", "addr", srv.Addr().String())
			}
			url := srv.URL()
			port := srv.Addr().Port
			names := make([]string, len(run.Tiles))
			for i, t := range run.Tiles {
				names[i] = t.Name
			}
			if a.summary(map[string]any{"url": url, "host": host, "port": port, "dir": run.Dir, "tiles": names}) {
				fmt.Fprintf(a.stdout, "lulc view: %s (%d tile(s): %s) at %s\n", run.Dir, len(names), strings.Join(names, ", "), url)
				machine, _ := os.Hostname()
				if machine == "" {
					machine = "HOST"
				}
				fmt.Fprintf(a.stdout, "from another machine: ssh -L %d:127.0.0.1:%d %s, then open http://127.0.0.1:%d/\n", port, port, machine, port)
				fmt.Fprintf(a.stdout, "Ctrl-C stops it\n")
			}
			if !noBrowser {
				if err := openBrowser(url); err != nil {
					a.log.Info("no browser opened: open the address yourself", "url", url, "why", err)
				}
			}
			return srv.Serve(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.IntVar(&port, "port", defaultViewPort, "port to serve on (0: any free port)")
	f.StringVar(&host, "host", view.DefaultHost, "address to bind: 127.0.0.1 serves this machine only; 0.0.0.0 every interface (anyone who reaches it sees the run)")
	f.StringVar(&labels, "labels", "", "a labels raster on a tile's grid, shown as that tile's labels (in place of a kept stack's labels.tif)")
	f.BoolVar(&noBrowser, "no-browser", false, "do not open a browser: print the address only")
	return cmd
}

// labelsTile returns the tile of run on whose class map's grid the labels
// raster at path lies: lulc view shows labels on a map's own grid and
// does not warp them.
func labelsTile(run *view.Run, path string) (string, error) {
	if fi, err := os.Stat(path); err != nil {
		return "", usagef("--labels: %v", err)
	} else if !fi.Mode().IsRegular() {
		return "", usagef("--labels %s: not a file", path)
	}
	li, err := raster.Inspect(path)
	if err != nil {
		return "", usagef("--labels %s: not a raster GDAL reads: %v", path, err)
	}
	var grids []string
	var first geo.Grid
	for i, t := range run.Tiles {
		ci, err := raster.Inspect(filepath.Join(run.Dir, t.Layers[view.LayerClass]))
		if err != nil {
			return "", fmt.Errorf("tile %s: %w", t.Name, err)
		}
		if sameGrid(li.Grid, ci.Grid) {
			return t.Name, nil
		}
		if i == 0 {
			first = ci.Grid
		}
		grids = append(grids, t.Name+" "+gridString(ci.Grid))
	}
	b := first.Bounds()
	return "", usagef("--labels %s (%s) is on none of the run's grids (%s): lulc view shows labels on a class map's own grid and does not warp them; warp them first, e.g. for tile %s: gdalwarp -t_srs EPSG:%d -te %s %s %s %s -ts %d %d -r near %s labels-on-grid.tif",
		path, gridString(li.Grid), strings.Join(grids, "; "), run.Tiles[0].Name, first.EPSG, num(b[0]), num(b[1]), num(b[2]), num(b[3]), first.Width, first.Height, path)
}

// sameGrid says whether two grids have the same CRS, size and pixels (to
// a thousandth of a pixel).
func sameGrid(a, b geo.Grid) bool {
	if a.EPSG != b.EPSG || a.Width != b.Width || a.Height != b.Height {
		return false
	}
	tol := 1e-3 * math.Abs(b.Transform[1])
	for i := range a.Transform {
		if math.Abs(a.Transform[i]-b.Transform[i]) > tol {
			return false
		}
	}
	return true
}

// gridString describes a grid for an error message.
func gridString(g geo.Grid) string {
	return fmt.Sprintf("EPSG:%d, %d×%d px of %s m from (%s, %s)", g.EPSG, g.Width, g.Height, num(g.Transform[1]), num(g.Transform[0]), num(g.Transform[3]))
}

// num writes a coordinate in full, without an exponent.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// openBrowser starts the user's browser on url, without waiting: $BROWSER
// (the first of its colon-separated commands), else xdg-open where a
// desktop session runs (on a server without one it would start a text
// browser in the terminal, or nothing).
func openBrowser(url string) error {
	name := ""
	if b := os.Getenv("BROWSER"); b != "" {
		name, _, _ = strings.Cut(b, ":")
	} else if os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != "" {
		name = "xdg-open"
	}
	if name == "" {
		return errors.New("no desktop session (DISPLAY, WAYLAND_DISPLAY) and no BROWSER")
	}
	args := strings.Fields(name)
	path, err := exec.LookPath(args[0])
	if err != nil {
		return fmt.Errorf("browser %s: %w", args[0], err)
	}
	c := exec.Command(path, append(args[1:], url)...)
	if err := c.Start(); err != nil {
		return fmt.Errorf("start %s: %w", args[0], err)
	}
	// Reap it whenever it exits; the page does not depend on it.
	go c.Wait()
	return nil
}
