package wire

// Combining CRC-32C values, as zlib's crc32_combine does: the CRC of a
// concatenation A||B from the CRCs of A and B and the length of B, without
// reading either again. A Builder takes the CRC of its records a block at a
// time as it appends them, while their bytes are in the cache, and at the
// end combines the CRC of the header with that of the records, rather than
// read a whole batch (a megabyte) back from memory.

// castagnoliPoly is the CRC-32C polynomial, reflected.
const castagnoliPoly = 0x82f63b78

// x2nTable[k] is x^(2^k) modulo the polynomial.
var x2nTable = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < len(t); k++ {
		p = multModP(p, p)
		t[k] = p
	}
	return t
}()

// multModP returns a(x) b(x) modulo the polynomial, with a and b reflected.
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ castagnoliPoly
		} else {
			b >>= 1
		}
	}
}

// x2nModP returns x^(n 2^k) modulo the polynomial.
func x2nModP(n int, k uint) uint32 {
	p := uint32(1) << 31 // x^0
	for ; n != 0; n >>= 1 {
		if n&1 != 0 {
			p = multModP(x2nTable[k&31], p)
		}
		k++
	}
	return p
}

// crcCombine returns the CRC-32C of A||B, given crcA, crcB and the length
// of B in bytes.
func crcCombine(crcA, crcB uint32, lenB int) uint32 {
	return multModP(x2nModP(lenB, 3), crcA) ^ crcB
}
