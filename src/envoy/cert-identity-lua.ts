// The Lua that lets Envoy state a verified client certificate's identity itself (docs/design.md,
// "Certificates on the fast path"), for the certificates it can read exactly as kube-apiserver
// does and no others: every other one is declined and left to skewgate. Run by the Lua filter
// (cert-identity.ts) on the route a certificate request without X-Remote-User first selects.
//
// It states only when all of these hold, each a subset of what Go's x509 and kube-apiserver's
// x509 authenticator accept and of what skewgate's verifier states (test/e2e/cert-fast-path.test.ts
// holds it to both): the subject is strict DER; every value is a PrintableString of Go's set or
// valid UTF-8 in a UTF8String; no value is empty, holds a control character or starts or ends
// with white space (a header would not carry it unchanged); there is a CN and no Kubernetes UID
// attribute; the client sent the leaf alone or with a CA of the bundle (no intermediate); the leaf's issuer is a CA of
// the bundle skewgate loaded, one that allows client authentication; and now is within the
// validity of the leaf and of that CA, to the second, rounded inwards. A certificate it declines,
// or fails on (the reading runs under pcall), goes on as it came: to skewgate. Pure: text out.

/** A CA of the bundle as the Lua checks it: its subject's DER (hex) and validity (Unix seconds). */
export interface IssuerWindow {
  readonly subjectHex: string;
  readonly notBefore: number;
  readonly notAfter: number;
}

export interface CertIdentityHeaders {
  readonly user: string;
  readonly group: string;
  /** X-Remote-Extra-<credential-id key>, escaped as client-go escapes it. */
  readonly credentialId: string;
  /** Set with `markerValue` on a request whose identity the Lua stated. */
  readonly marker: string;
  readonly markerValue: string;
}

/** Subject attribute OIDs the Lua knows (x509-subject.ts's). */
export interface CertIdentityOids {
  readonly commonName: string;
  readonly organization: string;
  readonly kubernetesUid: string;
}

/** A Lua string literal: every byte outside printable ASCII, quotes and backslash as \ddd. */
function luaString(s: string): string {
  return `"${[...Buffer.from(s, 'utf8')].map((b) => (b >= 0x20 && b < 0x7f && b !== 0x22 && b !== 0x5c ? String.fromCharCode(b) : `\\${b}`)).join('')}"`;
}

function luaWindows(windows: readonly IssuerWindow[]): string {
  return windows.map((w) => `  [${luaString(w.subjectHex)}] = { ${w.notBefore}, ${w.notAfter} },`).join('\n');
}

export function certIdentityLua(
  windows: readonly IssuerWindow[],
  bundleDerHex: readonly string[],
  headers: CertIdentityHeaders,
  oids: CertIdentityOids,
): string {
  return `-- skewgate: a verified client certificate's identity, stated only where it is exactly kube-apiserver's.
local ISSUERS = {
${luaWindows(windows)}
}
local BUNDLE = {
${bundleDerHex.map((h) => `  [${luaString(h)}] = true,`).join('\n')}
}
local USER, GROUP, CREDENTIAL = ${luaString(headers.user)}, ${luaString(headers.group)}, ${luaString(headers.credentialId)}
local MARKER, MARKER_VALUE = ${luaString(headers.marker)}, ${luaString(headers.markerValue)}
local OID_CN, OID_O, OID_UID = ${luaString(oids.commonName)}, ${luaString(oids.organization)}, ${luaString(oids.kubernetesUid)}
${LUA_BODY}`;
}

// The fixed part. Per worker: a parse per chain a client sent, kept; the clock per request.
const LUA_BODY = String.raw`
local CACHE_MAX = 4096
local cache, cached = {}, 0

local B64 = {}
do
  local chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  for i = 1, 64 do B64[chars:byte(i)] = i - 1 end
end

local function unbase64(s)
  local out, n, bits, acc = {}, 0, 0, 0
  for i = 1, #s do
    local v = B64[s:byte(i)]
    if v ~= nil then
      acc = acc * 64 + v
      bits = bits + 6
      if bits >= 8 then
        bits = bits - 8
        local byte = math.floor(acc / 2 ^ bits)
        acc = acc - byte * 2 ^ bits
        n = n + 1
        out[n] = string.char(byte)
      end
    end
  end
  return table.concat(out)
end

-- One DER element at pos, ending by limit: tag, first and last byte of its contents; nil if not DER.
local function element(der, pos, limit)
  if pos + 1 > limit then return nil end
  local tag, len = der:byte(pos, pos + 1)
  if tag % 32 == 31 then return nil end
  local start = pos + 2
  if len >= 0x80 then
    local k = len - 0x80
    if k < 1 or k > 3 or start + k - 1 > limit then return nil end
    if der:byte(start) == 0 then return nil end
    len = 0
    for i = 0, k - 1 do len = len * 256 + der:byte(start + i) end
    if len < 0x80 then return nil end
    start = start + k
  end
  local last = start + len - 1
  if last > limit then return nil end
  return tag, start, last
end

local function oid(der, s, e)
  if e < s or der:byte(e) >= 0x80 then return nil end
  local parts, v, fresh = {}, 0, true
  for i = s, e do
    local b = der:byte(i)
    if fresh and b == 0x80 then return nil end
    fresh = false
    v = v * 128 + (b % 128)
    if v > 2 ^ 40 then return nil end
    if b < 0x80 then
      if #parts == 0 then
        local a = v < 40 and 0 or (v < 80 and 1 or 2)
        parts[1], parts[2] = tostring(a), tostring(v - a * 40)
      else
        parts[#parts + 1] = tostring(v)
      end
      v, fresh = 0, true
    end
  end
  return table.concat(parts, '.')
end

-- Strict UTF-8 as Go's utf8.Valid: no overlong form, surrogate or code point past U+10FFFF.
local function utf8(s)
  local i, n = 1, #s
  while i <= n do
    local c = s:byte(i)
    local k, lo, hi = 0, 0x80, 0xBF
    if c < 0x80 then k = 0
    elseif c >= 0xC2 and c <= 0xDF then k = 1
    elseif c == 0xE0 then k, lo = 2, 0xA0
    elseif c == 0xED then k, hi = 2, 0x9F
    elseif c >= 0xE1 and c <= 0xEF then k = 2
    elseif c == 0xF0 then k, lo = 3, 0x90
    elseif c >= 0xF1 and c <= 0xF3 then k = 3
    elseif c == 0xF4 then k, hi = 3, 0x8F
    else return false end
    for j = 1, k do
      local d = s:byte(i + j)
      if d == nil then return false end
      if j == 1 then
        if d < lo or d > hi then return false end
      elseif d < 0x80 or d > 0xBF then return false end
    end
    i = i + k + 1
  end
  return true
end

-- Go's PrintableString set (with the '*' and '&' it also takes).
local PRINTABLE = "^[A-Za-z0-9 '()+,%-%./:=?*&]*$"
-- White space JavaScript's trim() removes (skewgate declines values it would change), as UTF-8.
local SPACES = { ' ', '\194\160', '\225\154\128', '\226\128\168', '\226\128\169', '\226\128\175', '\226\129\159', '\227\128\128', '\239\187\191' }
for c = 0x80, 0x8A do SPACES[#SPACES + 1] = '\226\128' .. string.char(c) end

-- A value a header carries unchanged: not empty, no control character, no white space at either end.
local function carried(v)
  if v == '' or v:find('[%z\1-\31\127]') then return false end
  for _, sp in ipairs(SPACES) do
    if v:sub(1, #sp) == sp or v:sub(-#sp) == sp then return false end
  end
  return true
end

local function hex(s)
  return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end))
end

-- The identity of a leaf's DER: { user, groups, issuer (hex) }, or nil and why it is left to skewgate.
local function identity(der)
  local tag, s, e = element(der, 1, #der)
  if tag ~= 0x30 or e ~= #der then return nil, 'not one certificate' end
  tag, s, e = element(der, s, e)
  if tag ~= 0x30 then return nil, 'no TBSCertificate' end
  local limit, pos = e, s
  local t, fs, fe = element(der, pos, limit)
  if t == 0xA0 then pos = fe + 1 end
  local want = { 0x02, 0x30, 0x30, 0x30, 0x30 }
  local issuer, subject
  for i = 1, 5 do
    t, fs, fe = element(der, pos, limit)
    if t ~= want[i] then return nil, 'not a TBSCertificate' end
    if i == 3 then issuer = der:sub(pos, fe) end
    if i == 5 then subject = { fs, fe } end
    pos = fe + 1
  end
  local cn, groups, rdn = nil, {}, subject[1]
  while rdn <= subject[2] do
    local ts, ss, es = element(der, rdn, subject[2])
    if ts ~= 0x31 then return nil, 'RDN' end
    local atv = ss
    while atv <= es do
      local ta, sa, ea = element(der, atv, es)
      if ta ~= 0x30 then return nil, 'AttributeTypeAndValue' end
      local to, so, eo = element(der, sa, ea)
      if to ~= 0x06 then return nil, 'attribute type' end
      local tv, sv, ev = element(der, eo + 1, ea)
      if tv == nil or ev ~= ea then return nil, 'attribute value' end
      local id = oid(der, so, eo)
      if id == nil then return nil, 'OID' end
      local value = der:sub(sv, ev)
      if tv == 0x13 then
        if not value:match(PRINTABLE) then return nil, 'PrintableString' end
      elseif tv == 0x0C then
        if not utf8(value) then return nil, 'UTF8String' end
      else
        return nil, 'string type'
      end
      if id == OID_UID then return nil, 'Kubernetes UID' end
      if id == OID_CN or id == OID_O then
        if not carried(value) then return nil, 'value a header would change' end
        if id == OID_CN then cn = value else groups[#groups + 1] = value end
      end
      atv = ea + 1
    end
    rdn = es + 1
  end
  if cn == nil then return nil, 'no CN' end
  return { user = cn, groups = groups, issuer = hex(issuer) }
end

-- The PEM blocks of a chain, as DER.
local function ders(pem)
  local out = {}
  for body in pem:gmatch('%-%-%-%-%-BEGIN[^-]*%-%-%-%-%-(.-)%-%-%-%-%-END') do out[#out + 1] = unbase64(body) end
  return out
end

-- The chain the client sent (leaf first), read once per worker: the leaf's identity, or why not.
-- What Envoy says of the leaf (its validity, its digest) is fixed for the chain: asked once too.
local function read(chain, ssl)
  local known = cache[chain]
  if known ~= nil then return known end
  local pem = chain:gsub('%%(%x%x)', function(x) return string.char(tonumber(x, 16)) end)
  local sent = ders(pem)
  local id, why
  -- The leaf alone, or with one CA of the bundle sent along (as OpenSSL clients do); an
  -- intermediate is Go's to walk: left to skewgate.
  if #sent == 0 or #sent > 2 or (#sent == 2 and not BUNDLE[hex(sent[2])]) then
    why = 'chain'
  else
    id, why = identity(sent[1])
  end
  if id ~= nil then
    id.from, id.to = ssl:validFromPeerCertificate(), ssl:expirationPeerCertificate()
    id.credential = 'X509SHA256=' .. ssl:sha256PeerCertificateDigest()
  end
  known = id or { declined = why }
  if cached >= CACHE_MAX then cache, cached = {}, 0 end
  cache[chain], cached = known, cached + 1
  return known
end

-- The identity stated, when every condition holds (true); nothing written otherwise.
local function state(h, ssl, chain)
  if not ssl:peerCertificateValidated() then return false end
  local id = read(chain, ssl)
  if id.declined ~= nil then return false end
  local ca = ISSUERS[id.issuer]
  if ca == nil then return false end
  local now = os.time()
  if now < id.from or now < ca[1] or now + 1 > id.to or now + 1 > ca[2] then return false end
  local headers = h:headers()
  headers:replace(USER, id.user)
  headers:remove(GROUP)
  for _, g in ipairs(id.groups) do headers:add(GROUP, g) end
  headers:replace(CREDENTIAL, id.credential)
  headers:replace(MARKER, MARKER_VALUE)
  h:clearRouteCache()
  return true
end

function envoy_on_request(h)
  local ssl = h:streamInfo():downstreamSslConnection()
  if ssl == nil or not ssl:peerCertificatePresented() then return end
  local chain = ssl:urlEncodedPemEncodedPeerCertificateChain()
  local ok = pcall(state, h, ssl, chain)
  if ok then return end
  -- The script failed on this certificate: nothing of ours stays on the request (skewgate judges
  -- it), and the chain is declined at once from now on.
  local headers = h:headers()
  headers:remove(USER)
  headers:remove(GROUP)
  headers:remove(CREDENTIAL)
  headers:remove(MARKER)
  if cache[chain] == nil then
    if cached >= CACHE_MAX then cache, cached = {}, 0 end
    cache[chain], cached = { declined = 'script error' }, cached + 1
  end
end
`;
