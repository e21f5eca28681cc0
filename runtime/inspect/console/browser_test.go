package console

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/seqby/seqby/runtime/inspect"
)

// chromium finds a Chromium (Debian's chromium, which .ci/ensure-chromium
// installs), or "" when there is none.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// The console in a real headless Chromium, against a real redis-server
// with two engines, a halted key and a paused key: the overview loads;
// the halted partition is skipped through the confirmation and its key
// completes; a paused key is resumed and goes on; a key is paused, holds
// its next event, and goes on once resumed. It takes the screenshots of
// docs/console (SEQBY_SCREENSHOTS names the directory to write them to;
// make screenshots sets it).
func TestBrowser(t *testing.T) {
	bin := chromium()
	if bin == "" {
		// Install it as make test does (Debian's chromium, with apt-get),
		// and skip only when that cannot be done.
		out, err := exec.Command("../../../.ci/ensure-chromium").CombinedOutput()
		if bin = chromium(); bin == "" {
			t.Skipf("no Chromium on PATH (chromium, chromium-browser, google-chrome), and .ci/ensure-chromium could not install one (%v): %s", err, out)
		}
	}
	shots := os.Getenv("SEQBY_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	s := newScene(t, 2)
	s.publish(&placed{Client: "a", Seq: 1, Poison: true}, &placed{Client: "a", Seq: 2},
		&placed{Client: "p", Seq: 1}, &placed{Client: "b", Seq: 1})
	for _, k := range []string{"c-1", "c-2", "c-3", "c-4"} {
		s.publish(&placed{Client: k, Seq: 1})
	}
	eventually(t, 30*time.Second, "a halted, p and b applied", func() bool {
		hs, _ := inspect.New(s.c).Halts(s.ctx, "")
		return len(hs) == 1 && s.count("p") == 1 && s.count("b") == 1
	})
	in := inspect.New(s.c)
	if _, err := in.Pause(s.ctx, "orders", "shop:{p}", "console-test"); err != nil {
		t.Fatal(err)
	}
	s.publish(&placed{Client: "p", Seq: 2})

	con, err := New(in, Options{Write: true, Token: "s3cret", SampleInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	srv := httptest.NewServer(http.StripPrefix("/seqby", con))
	t.Cleanup(srv.Close)
	base := srv.URL + "/seqby"

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	// No timeout on the browser's context: it would stop the browser.
	// Each step below has one of its own.
	bctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)

	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	if _, err := chromedp.Call(bctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return chromedp.Void{}, err
			}
			return chromedp.Void{}, os.WriteFile(filepath.Join(shots, name), png, 0o644)
		}
	}
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	confirm := func() []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{
			chromedp.WaitVisible(chromedp.ID("would")),
			chromedp.Click(chromedp.ID("confirm-button")),
			chromedp.WaitVisible(chromedp.ID("notice")),
		}
	}
	run("load the overview",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("handler-orders")),
	)
	// Let the sampler draw a line before the overview's screenshot.
	eventually(t, 10*time.Second, "two samples", func() bool {
		con.samples.mu.Lock()
		defer con.samples.mu.Unlock()
		return len(con.samples.series["orders"]) >= 2
	})
	run("screenshot the overview", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("handler-orders")), shot("overview.png"))
	run("the handler page", chromedp.Navigate(base+"/handler?name=orders"), chromedp.WaitVisible(chromedp.ID("partitions")), shot("handler.png"))

	// Skip the halted head through its confirmation.
	run("open the halted partition",
		chromedp.Navigate(base+"/halted"),
		chromedp.WaitVisible(chromedp.ID("halts")),
		shot("halted.png"),
		chromedp.Click(chromedp.CSS("#halts a")),
		chromedp.WaitVisible(chromedp.ID("halt")),
		shot("partition.png"),
	)
	run("skip it, confirmed", append([]chromedp.Action[chromedp.Void]{
		chromedp.Click(chromedp.CSS(`#halt button[data-op="Skip"]`)),
		chromedp.WaitVisible(chromedp.ID("would")),
		shot("confirm.png"),
	}, confirm()...)...)
	eventually(t, 30*time.Second, "a completes after the skip", func() bool { return s.count("a") == 1 })

	// The paused key goes on once resumed from the paused page.
	run("resume p", append([]chromedp.Action[chromedp.Void]{
		chromedp.Navigate(base + "/paused"),
		chromedp.WaitVisible(chromedp.ID("pauses")),
		shot("paused.png"),
		chromedp.Click(chromedp.CSS(`#pauses button[data-op="Resume"]`)),
	}, confirm()...)...)
	eventually(t, 30*time.Second, "p goes on after the resume", func() bool { return s.count("p") == 2 })

	// Pause b from its partition page: its next event waits until b is
	// resumed.
	run("pause b", append([]chromedp.Action[chromedp.Void]{
		chromedp.Navigate(base + "/partition?handler=orders&stream=shop%3A%7Bb%7D"),
		chromedp.WaitVisible(chromedp.ID("pause")),
		chromedp.Click(chromedp.CSS(`#pause button[data-op="Pause"]`)),
	}, confirm()...)...)
	s.publish(&placed{Client: "b", Seq: 2}, &placed{Client: "c-1", Seq: 2})
	eventually(t, 30*time.Second, "c-1/2 applied past b's pause", func() bool { return s.count("c-1") == 2 })
	if n := s.count("b"); n != 1 {
		t.Fatalf("b applied %d events while paused, want 1", n)
	}
	run("resume b", append([]chromedp.Action[chromedp.Void]{
		chromedp.Navigate(base + "/partition?handler=orders&stream=shop%3A%7Bb%7D"),
		chromedp.WaitVisible(chromedp.CSS("#pause .pausednote")),
		chromedp.Click(chromedp.CSS(`#pause button[data-op="Resume"]`)),
	}, confirm()...)...)
	eventually(t, 30*time.Second, "b goes on after the resume", func() bool { return s.count("b") == 2 })
	run("the audit log", chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(chromedp.ID("audit")), shot("audit.png"))
	log, err := in.AuditLog(s.ctx, 10)
	if err != nil || len(log) != 4 {
		t.Fatalf("audit log: %d entries, %v; want skip, resume, pause, resume", len(log), err)
	}
	for _, e := range log {
		if e.Who != "console:alice" {
			t.Errorf("audit entry %+v: want who console:alice", e)
		}
	}
}
