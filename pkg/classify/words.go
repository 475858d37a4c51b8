package classify

import "strings"

// set builds a lookup set from space-separated words.
func set(words ...string) map[string]bool {
	m := make(map[string]bool)
	for _, w := range words {
		for _, f := range strings.Fields(w) {
			m[f] = true
		}
	}
	return m
}

// stopwords are English function words. They are never symbols, never
// concepts and end a multi-word target.
var stopwords = set(
	"a an the this that these those some any all each every no not nor",
	"and or but if then else so than too very just only also even still",
	"of in on at to for from by with without into onto over under about",
	"above below between through during before after since until within across",
	"against along among around behind beyond via per upon out off up down",
	"is are was were be been being am do does did doing done has have had having",
	"can could will would shall should may might must need needs",
	"i me my mine we us our ours you your yours he him his she her hers it its",
	"they them their theirs what which who whom whose where when why how",
	"there here whether while because though although unless instead",
	"it's its' i'm i've i'd we're we've they're you're don't doesn't didn't",
	"isn't aren't wasn't weren't can't cannot won't wouldn't shouldn't",
	"couldn't hasn't haven't what's where's who's that's there's let's",
	"such same other another more most less least many much few own",
	"yes ok okay please etc e.g i.e vs via",
)

// fillers are question words and request verbs that carry no topic: they
// are dropped from Concepts.
var fillers = set(
	"show tell explain find locate look list give get see know want",
	"work works working happen happens thing things stuff something anything everything",
	"code codebase repo repository project part piece",
)

// common are everyday English words that often also name a symbol (get,
// run, update, Find). A syms lookup never turns one of them into a symbol:
// "Update the docs" must not hit an Update method.
var common = set(
	"add adds added adding allow allows allowed avoid avoids apply applies",
	"bump build builds call calls called change changes check checks clean",
	"cleanup close closes copy create creates delete deletes deprecate",
	"disable disables do document drop drops enable enables ensure error errors",
	"fail fails failed failing fix fixes fixed fixing get gets handle handles",
	"help ignore implement improve improves include includes init install keep",
	"let load loads log logs make makes merge move moves new old open parse",
	"pass passes print put raise raises read reads refactor remove removes",
	"rename replace report reset restore return returns revert run runs save",
	"send sends set sets show skip sort split start starts stop stops support",
	"supports switch take test tests try turn update updates upgrade use uses",
	"used using validate wait warn write writes",
	"bug bugs issue issues file files data value values type types name names",
	"list lists map maps string strings number numbers time date user users",
	"item items key keys line lines option options path paths size status",
	"text thing way case cases result results info input output default",
	"first last next main new old true false null none nil main help version",
	"docs doc readme example examples readme config settings setting",
	"function functions method methods class classes module modules package",
	"variable field object objects struct interface",
	"python go rust java javascript typescript linux windows macos",
	"when why how what where who which",
)

// brands are product names written in CamelCase that are not code
// identifiers of the repository (a syms lookup can still claim them).
var brands = set(
	"github gitlab javascript typescript coffeescript actionscript macos ios",
	"iphone ipad youtube linkedin powershell vscode numpy pypi oauth oauth2",
	"websocket websockets postgresql mysql mongodb graphql devops openai",
	"chatgpt nodejs jquery mariadb wordpress dockerhub bitbucket paypal",
	"pytorch tensorflow pycharm intellij jetbrains webassembly pyinstaller",
	"ipython jupyterlab openapi openssl libressl boringssl webkit webgl webrtc",
	"circleci travisci appveyor sonarqube pypy cpython micropython ironpython",
	"graalvm openjdk luajit neovim macbook dynamodb clickhouse bigquery",
	"fastapi ipv4 ipv6 ebay iot sqlserver visualstudio onedrive sharepoint",
	"javadoc jsdoc typedoc openbsd freebsd netbsd dragonflybsd",
	"ghz mhz khz kib mib gib tib kbps mbps gbps",
)

// primitives are built-in numeric types whose names mix letters and digits
// ("f64", "int32"): the language's, not the repository's, so only a syms
// lookup can make one a symbol.
var primitives = set(
	"i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 isize usize",
	"int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64",
	"complex64 complex128",
)

// abbreviations are dotted tokens that are English, not code.
var abbreviations = set("e.g i.e a.k.a n.b p.s etc vs u.s u.k a.m p.m")

// constructs are code-construct nouns; "the X function" marks X a symbol.
var constructs = set(
	"function func method class struct interface trait enum type constant",
	"const variable var field attribute property decorator macro fixture",
	"constructor getter setter callback hook endpoint handler",
)

// notSlot are words that fill a construct slot without naming anything:
// "the helper function", "a new method".
var notSlot = set(
	"helper new old same wrong default internal private public base abstract",
	"static global anonymous lambda utility util wrapper main entry custom",
	"generic top inner outer nested main first last next previous current",
	"following above below given async sync whole entire return",
)

// conventional are Conventional Commits types: "fix(router): ..." is a type
// and scope, not a call of fix.
var conventional = set("fix feat feature chore docs doc refactor test tests perf build ci style revert deps")

// codeDirs are first path segments that mark a slash token as a path.
var codeDirs = set(
	"src pkg lib libs internal cmd app apps test tests spec docs scripts",
	"include bin tools examples vendor node_modules packages modules crates",
	"server client api web core",
)

// slashWords are slash pairs that are English, not paths.
var slashWords = set(
	"and/or either/or client/server read/write input/output yes/no",
	"true/false on/off in/out he/she his/her start/stop w/o w/ i/o",
)

var months = set(
	"january february march april june july august september october",
	"november december jan feb mar apr jun jul aug sep sept oct nov dec",
)

var numberWords = set(
	"one two three four five six seven eight nine ten eleven twelve",
	"fifteen twenty thirty fifty hundred few couple several",
)

// determiners are skipped at the start of a target slot.
var determiners = set("the a an this that these those my our your its their all any every some each")
