/*
 * preload/nextsym.c - the real functions' addresses for many names in one
 * pass, the way dlsym(RTLD_NEXT) finds each (ADR-551).
 *
 * dlsym costs some 800 instructions a name (the loader's lock, an error
 * frame, a look-up through every object of the scope), and the shim binds
 * up to 38 names in every process. The objects that follow the shim in the
 * global search order are, in that order, the ones dl_iterate_phdr lists
 * after it: the loader keeps its list of the objects loaded at start-up
 * in search order, and appends everything dlopen loads later. So one walk
 * of that list collects the dynamic symbol tables of the objects from the
 * shim to libc, and each name is then looked up in them with their GNU
 * hash tables (the Bloom filter rejects most objects in a few
 * instructions), accepting a definition as the loader's dlsym does
 * (defined, a function, data or untyped symbol, the default version).
 * The first complete walk is kept - the objects loaded at start-up are
 * never unloaded - and a later look-up reads only it and the symbol
 * tables: no lock, no allocation, so a signal handler may make it.
 *
 * Whatever the walk cannot settle exactly goes to dlsym, name by name:
 * the shim loaded after libc (a dlopen), an object on the way without a
 * GNU hash table or beyond the few recorded, a name libc does not define,
 * an indirect function (its resolver must run), a local, unique or
 * thread-local definition, a name with more than one default version.
 * No libc string function is called: each would be bound lazily, which
 * costs as much as the look-ups it saves.
 */
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "nextsym.h"

/* Objects from the shim to libc: the shim's own dependencies, and the
 * program's, loaded after it; more than this is unusual, and falls back
 * to dlsym. */
#define MAX_OBJECTS 16

struct object {
	const ElfW(Sym) * symtab;
	const char *strtab;
	const uint32_t *gnu_hash;
	const ElfW(Half) * versym; /* NULL: no symbol versions */
	ElfW(Addr) base;
};

/* The objects ahead of the shim (the program, earlier preloads) and
 * after it, up to libc, in search order. */
struct scope {
	uintptr_t self; /* an address inside the shim */
	bool after_self;
	bool ahead_complete; /* every object ahead recorded */
	bool complete; /* libc reached, every object on the way recorded */
	size_t nahead, n;
	struct object ahead[MAX_OBJECTS];
	struct object obj[MAX_OBJECTS];
};

/* The first complete walk, kept: the objects loaded at start-up stay, in
 * their order, for the life of the process. */
static struct scope cached;
static atomic_int cache_state; /* 0 none, 1 being written, 2 ready */

static bool same(const char *a, const char *b)
{
	while (*a != '\0' && *a == *b) {
		a++;
		b++;
	}
	return *a == *b;
}

/* libc by its file name, "libc.so.<version>" in any directory. */
static bool is_libc(const char *path)
{
	const char *base = path;
	const char *want = "libc.so.";

	for (; *path != '\0'; path++)
		if (*path == '/')
			base = path + 1;
	while (*want != '\0' && *base == *want) {
		base++;
		want++;
	}
	return *want == '\0';
}

static bool contains(const struct dl_phdr_info *info, uintptr_t addr)
{
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && addr >= start &&
		    addr - start < ph->p_memsz)
			return true;
	}
	return false;
}

/* The loader relocates the addresses of a writable dynamic section in
 * place; a read-only one (the vDSO's) keeps offsets from the base. */
static const void *dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) p)
{
	return (const void *)(p < info->dlpi_addr ? p + info->dlpi_addr : p);
}

/* Record @info's tables. False when it has none we can read. */
static bool record(const struct dl_phdr_info *info, struct object *o)
{
	const ElfW(Dyn) *dyn = NULL;

	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr +
						  info->dlpi_phdr[i].p_vaddr);
	if (dyn == NULL)
		return false;
	*o = (struct object){.base = info->dlpi_addr};
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB:
			o->symtab = dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_STRTAB:
			o->strtab = dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_GNU_HASH:
			o->gnu_hash = dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_VERSYM:
			o->versym = dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		default:
			break;
		}
	}
	return o->symtab != NULL && o->strtab != NULL && o->gnu_hash != NULL;
}

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct scope *s = arg;

	(void)size;
	if (!s->after_self) {
		s->after_self = contains(info, s->self);
		if (s->after_self)
			return 0;
		if (s->nahead == MAX_OBJECTS ||
		    !record(info, &s->ahead[s->nahead]))
			s->ahead_complete = false;
		else
			s->nahead++;
		return 0;
	}
	if (s->n == MAX_OBJECTS || !record(info, &s->obj[s->n]))
		return 1; /* stop, incomplete */
	s->n++;
	if (info->dlpi_name != NULL && is_libc(info->dlpi_name)) {
		s->complete = true;
		return 1;
	}
	return 0;
}

/* The GNU hash of @name (Bernstein's h * 33 + c, from 5381). */
static uint32_t gnu_hash(const char *name)
{
	uint32_t h = 5381;

	for (; *name != '\0'; name++)
		h = h * 33 + (unsigned char)*name;
	return h;
}

enum found { NOT_HERE, FOUND, UNSURE };

/* Is @sym a definition the loader's look-up accepts as one? (The
 * ELF64_ST_ macros read st_info the same way for both ELF classes.) */
static bool defines(const ElfW(Sym) * sym)
{
	unsigned type = ELF64_ST_TYPE(sym->st_info);

	if (sym->st_shndx == SHN_UNDEF ||
	    (sym->st_value == 0 && sym->st_shndx != SHN_ABS && type != STT_TLS))
		return false;
	return type == STT_NOTYPE || type == STT_OBJECT || type == STT_FUNC ||
	       type == STT_COMMON || type == STT_TLS || type == STT_GNU_IFUNC;
}

/* A definition we can hand out as it is: global or weak, and an address
 * (not an indirect function's resolver, not a thread-local offset). */
static enum found take(const struct object *o, const ElfW(Sym) * sym,
		       void **out)
{
	unsigned type = ELF64_ST_TYPE(sym->st_info);
	unsigned bind = ELF64_ST_BIND(sym->st_info);

	if ((bind != STB_GLOBAL && bind != STB_WEAK) || type == STT_TLS ||
	    type == STT_GNU_IFUNC)
		return UNSURE;
	*out = (void *)(o->base + sym->st_value);
	return FOUND;
}

/*
 * Look @name (GNU hash @h) up in @o, as the loader's dlsym does: an
 * unversioned definition, else the one default (not hidden) version when
 * there is exactly one.
 */
static enum found lookup(const struct object *o, const char *name, uint32_t h,
			 void **out)
{
	const uint32_t *gh = o->gnu_hash;
	uint32_t nbuckets = gh[0], symoffset = gh[1], nbloom = gh[2];
	uint32_t shift = gh[3];
	const ElfW(Addr) *bloom = (const ElfW(Addr) *)(const void *)(gh + 4);
	const uint32_t *buckets =
	    (const uint32_t *)(const void *)(bloom + nbloom);
	const uint32_t *chain = buckets + nbuckets;
	const unsigned bits = sizeof(ElfW(Addr)) * 8;
	const ElfW(Sym) *versioned = NULL;
	unsigned nversioned = 0;
	ElfW(Addr) word;
	uint32_t i;

	if (nbuckets == 0 || nbloom == 0)
		return NOT_HERE;
	word = bloom[(h / bits) & (nbloom - 1)];
	if (((word >> (h % bits)) & (word >> ((h >> shift) % bits)) & 1) == 0)
		return NOT_HERE;
	i = buckets[h % nbuckets];
	if (i < symoffset)
		return NOT_HERE;
	for (;; i++) {
		uint32_t h2 = chain[i - symoffset];
		const ElfW(Sym) *sym = &o->symtab[i];

		if (((h2 ^ h) >> 1) == 0 &&
		    same(name, o->strtab + sym->st_name) && defines(sym)) {
			ElfW(Half) v = o->versym ? o->versym[i] : 0;

			if ((v & 0x7fff) < 2)
				return take(o, sym, out);
			if ((v & 0x8000) == 0 && nversioned++ == 0)
				versioned = sym;
		}
		if (h2 & 1)
			break;
	}
	if (nversioned == 1)
		return take(o, versioned, out);
	return nversioned == 0 ? NOT_HERE : UNSURE;
}

/*
 * The scope, walked now into @local unless a complete walk is kept; the
 * first complete one is kept (a thread that loses the race to keep it
 * uses its own).
 */
static const struct scope *scope_of(struct scope *local)
{
	int expected = 0;

	if (atomic_load_explicit(&cache_state, memory_order_acquire) == 2)
		return &cached;
	*local = (struct scope){.self = (uintptr_t)(void *)rx__next_resolve,
				.ahead_complete = true};
	dl_iterate_phdr(visit, local);
	if (local->complete &&
	    atomic_compare_exchange_strong(&cache_state, &expected, 1)) {
		cached = *local;
		atomic_store_explicit(&cache_state, 2, memory_order_release);
	}
	return local;
}

void rx__next_resolve(const char *const *names, void **out, size_t n)
{
	struct scope local;
	const struct scope *s;
	int saved = errno;

	s = scope_of(&local);
	for (size_t i = 0; i < n; i++) {
		enum found f = NOT_HERE;
		uint32_t h = gnu_hash(names[i]);

		out[i] = NULL;
		for (size_t k = 0; s->complete && f == NOT_HERE && k < s->n;
		     k++)
			f = lookup(&s->obj[k], names[i], h, &out[i]);
		if (f != FOUND)
			out[i] = dlsym(RTLD_NEXT, names[i]);
	}
	errno = saved;
}

bool rx__next_kept(void)
{
	struct scope local;

	return scope_of(&local)->complete &&
	       atomic_load_explicit(&cache_state, memory_order_acquire) == 2;
}

bool rx__next_lookup(const char *name, void **out)
{
	uint32_t h = gnu_hash(name);

	if (atomic_load_explicit(&cache_state, memory_order_acquire) != 2)
		return false;
	for (size_t k = 0; k < cached.n; k++) {
		enum found f = lookup(&cached.obj[k], name, h, out);

		if (f != NOT_HERE)
			return f == FOUND;
	}
	return false;
}

int rx__next_defined_ahead(const char *name)
{
	struct scope local;
	const struct scope *s = scope_of(&local);
	uint32_t h = gnu_hash(name);
	void *p;

	if (!s->complete || !s->ahead_complete)
		return -1;
	for (size_t k = 0; k < s->nahead; k++) {
		enum found f = lookup(&s->ahead[k], name, h, &p);

		if (f != NOT_HERE)
			return f == FOUND ? 1 : -1;
	}
	return 0;
}
