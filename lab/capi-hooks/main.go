// capi-hook-check: checks a Cluster API Runtime Extension over HTTPS against the Runtime SDK's
// published Go types (sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1), as Cluster API's own
// runtime client would call it: Discovery first, then each discovered upgrade hook once
// (built by lab/build-capi-hooks.sh).
//
//	capi-hook-check --url https://host:port [--ca ca.pem] --from v1.35.4 --to v1.36.3
//
// stdout: one JSON line per conforming hook answer; stderr: one line per contract violation
// (exit 1 after checking the rest). A transport error stops at once (exit 1).
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

// version is the module version of sigs.k8s.io/cluster-api/api, set by the build (-X).
var version = "dev"

// result is the stdout line of one hook call.
type result struct {
	Hook              string `json:"hook"`
	Handler           string `json:"handler"`
	Status            string `json:"status"`
	Message           string `json:"message"`
	RetryAfterSeconds *int32 `json:"retryAfterSeconds,omitempty"`
}

type checker struct {
	client     *http.Client
	base       string
	cat        *runtimecatalog.Catalog
	from, to   string
	violations int
}

func main() {
	base := flag.String("url", "", "the extension's base URL (https://host:port)")
	ca := flag.String("ca", "", "PEM file of the CA that verifies the server (default: the system's)")
	from := flag.String("from", "", "the Kubernetes version upgraded from, e.g. v1.35.4")
	to := flag.String("to", "", "the Kubernetes version upgraded to, e.g. v1.36.3")
	showVersion := flag.Bool("version", false, "print the Runtime SDK module version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Printf("capi-hook-check %s\n", version)
		return
	}
	if u, err := url.Parse(*base); err != nil || u.Scheme != "https" || u.Host == "" || *from == "" || *to == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: capi-hook-check --url https://host:port [--ca FILE] --from vX.Y.Z --to vX.Y.Z")
		os.Exit(2)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if *ca != "" {
		tlsConfig.RootCAs = x509.NewCertPool()
		if !tlsConfig.RootCAs.AppendCertsFromPEM(must(os.ReadFile(*ca))) {
			fatal(fmt.Errorf("%s: no PEM certificate in it", *ca))
		}
	}
	// The catalog is the published contract: hook names, request and response types, GVKs.
	cat := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(cat); err != nil {
		fatal(err)
	}
	c := &checker{
		// No proxy from the environment (a fresh Transport has none): the extension is dialled
		// directly. 30 s: the longest timeoutSeconds a handler may declare.
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}},
		base:   strings.TrimRight(*base, "/"), cat: cat, from: *from, to: *to,
	}
	for _, h := range c.discover() {
		c.callHook(h)
	}
	if c.violations > 0 {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "capi-hook-check: %v\n", err)
	os.Exit(1)
}

// must: errors that are no answer of the extension's (the CA file, the catalog, encoding) stop the check.
func must[T any](v T, err error) T {
	if err != nil {
		fatal(err)
	}
	return v
}

func (c *checker) violation(hook, handler, format string, args ...any) {
	where := hook
	if handler != "" {
		where += " (handler " + handler + ")"
	}
	fmt.Fprintf(os.Stderr, "capi-hook-check: %s: %s\n", where, fmt.Sprintf(format, args...))
	c.violations++
}

// discover calls Discovery and returns the handlers that passed every check.
func (c *checker) discover() []runtimehooksv1.ExtensionHandler {
	gvh, resp := must(c.cat.GroupVersionHook(runtimehooksv1.Discovery)), &runtimehooksv1.DiscoveryResponse{}
	if !c.exchange(gvh, "", &runtimehooksv1.DiscoveryRequest{}, resp) {
		return nil
	}
	if resp.Status != runtimehooksv1.ResponseStatusSuccess {
		c.violation(gvh.Hook, "", "status %q, want %q (message %q)", resp.Status, runtimehooksv1.ResponseStatusSuccess, resp.Message)
		return nil
	}
	var ok []runtimehooksv1.ExtensionHandler
	for _, h := range resp.Handlers {
		hook := h.RequestHook.Hook
		bad := func(format string, args ...any) {
			c.violation(fmt.Sprintf("Discovery: handler %q for %s", h.Name, hook), "", format, args...)
		}
		before := c.violations
		if errs := validation.IsDNS1123Label(h.Name); len(errs) > 0 {
			bad("name %q is not a DNS-1123 label: %s", h.Name, strings.Join(errs, "; "))
		}
		gv, err := schema.ParseGroupVersion(h.RequestHook.APIVersion)
		if err != nil || gv != runtimehooksv1.GroupVersion {
			bad("requestHook.apiVersion %q, want %q", h.RequestHook.APIVersion, runtimehooksv1.GroupVersion.String())
		} else if !c.cat.IsHookRegistered(runtimecatalog.GroupVersionHook{Group: gv.Group, Version: gv.Version, Hook: hook}) {
			bad("requestHook.hook %q is not a hook of %s", hook, gv)
		}
		if t := h.TimeoutSeconds; t != nil && (*t < 0 || *t > 30) {
			bad("timeoutSeconds %d is not in 0..30", *t)
		}
		if p := h.FailurePolicy; p != nil && *p != runtimehooksv1.FailurePolicyIgnore && *p != runtimehooksv1.FailurePolicyFail {
			bad("failurePolicy %q is neither %q nor %q", *p, runtimehooksv1.FailurePolicyIgnore, runtimehooksv1.FailurePolicyFail)
		}
		if c.violations == before {
			ok = append(ok, h)
		}
	}
	return ok
}

// callHook sends the handler's hook a request filled for an upgrade of cluster default/demo and
// checks the answer against the catalog's response type.
func (c *checker) callHook(h runtimehooksv1.ExtensionHandler) {
	gv, _ := schema.ParseGroupVersion(h.RequestHook.APIVersion) // checked by discover
	gvh := runtimecatalog.GroupVersionHook{Group: gv.Group, Version: gv.Version, Hook: h.RequestHook.Hook}
	req := must(c.cat.NewRequest(gvh))
	cluster := clusterv1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"},
	}
	// The upgrade hooks that take a Cluster and versions; the others need objects (machines,
	// patches) this check does not make.
	switch r := req.(type) {
	case *runtimehooksv1.BeforeClusterUpgradeRequest:
		r.Cluster, r.FromKubernetesVersion, r.ToKubernetesVersion = cluster, c.from, c.to
	case *runtimehooksv1.BeforeControlPlaneUpgradeRequest:
		r.Cluster, r.FromKubernetesVersion, r.ToKubernetesVersion = cluster, c.from, c.to
	case *runtimehooksv1.AfterControlPlaneUpgradeRequest:
		r.Cluster, r.KubernetesVersion = cluster, c.to
	case *runtimehooksv1.BeforeWorkersUpgradeRequest:
		r.Cluster, r.FromKubernetesVersion, r.ToKubernetesVersion = cluster, c.from, c.to
	case *runtimehooksv1.AfterWorkersUpgradeRequest:
		r.Cluster, r.KubernetesVersion = cluster, c.to
	default:
		c.violation(gvh.Hook, h.Name, "not supported by capi-hook-check, which calls only Before/AfterControlPlaneUpgrade, "+
			"Before/AfterWorkersUpgrade and BeforeClusterUpgrade")
		return
	}
	resp := must(c.cat.NewResponse(gvh))
	if !c.exchange(gvh, h.Name, req, resp) {
		return
	}
	r := resp.(runtimehooksv1.ResponseObject) // every hook's response type is one
	if s := r.GetStatus(); s != runtimehooksv1.ResponseStatusSuccess && s != runtimehooksv1.ResponseStatusFailure {
		c.violation(gvh.Hook, h.Name, "status %q is neither %q nor %q", s, runtimehooksv1.ResponseStatusSuccess, runtimehooksv1.ResponseStatusFailure)
		return
	}
	line := result{Hook: gvh.Hook, Handler: h.Name, Status: string(r.GetStatus()), Message: r.GetMessage()}
	if rr, ok := resp.(runtimehooksv1.RetryResponseObject); ok {
		n := rr.GetRetryAfterSeconds()
		line.RetryAfterSeconds = &n
	}
	out, _ := json.Marshal(line)
	fmt.Println(string(out))
}

// exchange POSTs req (its TypeMeta set from the catalog) to the hook's path and decodes the answer
// strictly into resp. False (and a violation reported) when the answer breaks the contract.
func (c *checker) exchange(gvh runtimecatalog.GroupVersionHook, handler string, req, resp runtime.Object) bool {
	req.GetObjectKind().SetGroupVersionKind(must(c.cat.Request(gvh)))
	body := must(json.Marshal(req))
	target := c.base + runtimecatalog.GVHToPath(gvh, handler)
	httpResp, err := c.client.Post(target, "application/json", bytes.NewReader(body))
	if err != nil {
		fatal(err)
	}
	defer httpResp.Body.Close()
	// 1 MiB: far above any real answer, and a bound on what a broken server can make us hold.
	answer, err := io.ReadAll(io.LimitReader(httpResp.Body, 1<<20))
	if err != nil {
		fatal(fmt.Errorf("POST %s: reading the answer: %w", target, err))
	}
	if httpResp.StatusCode != http.StatusOK {
		c.violation(gvh.Hook, handler, "POST %s: HTTP %d, want 200: %.200s", target, httpResp.StatusCode, answer)
		return false
	}
	if err := decodeStrict(answer, resp); err != nil {
		c.violation(gvh.Hook, handler, "POST %s: the answer does not match %T: %v", target, resp, err)
		return false
	}
	// The response's kind in the catalog is its Go type's name: the hook's name + "Response".
	want := must(c.cat.Response(gvh))
	if got := resp.GetObjectKind().GroupVersionKind(); got != want {
		c.violation(gvh.Hook, handler, "apiVersion %q kind %q, want %q %q", got.GroupVersion().String(), got.Kind, want.GroupVersion().String(), want.Kind)
		return false
	}
	return true
}

// decodeStrict: one JSON object, no field the published type lacks, nothing after it.
func decodeStrict(data []byte, out any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(out); err != nil {
		return err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more data after the JSON object")
	}
	return nil
}
