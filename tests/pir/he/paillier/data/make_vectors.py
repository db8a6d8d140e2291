#!/usr/bin/env python3
"""Known-answer vectors for veil's Paillier (pir/he/paillier), from a second implementation.

Provenance: written for veil (issue 14) from Paillier's paper (EUROCRYPT'99, "Public-Key
Cryptosystems Based on Composite Degree Residuosity Classes", Sections 3 and 7) using only
Python's standard library: big integers and the three-argument pow(). It shares no code with the
C++ implementation and computes encryption the textbook way, c = g^m * r^n mod n^2 with g = n + 1
(the C++ code uses (1 + m*n) * r^n), and decryption as L(c^lambda mod n^2) * mu mod n.
The primes are drawn from a seeded random.Random and tested with 64 Miller-Rabin rounds, so the
file is reproducible:  python3 make_vectors.py > vectors.txt

Records, one per line, numbers in lowercase hex:
  key  BITS p q                  primes of equal size, n = p*q has BITS bits
  enc  BITS m r c                c = g^m r^n mod n^2; Decrypt(c) = m
  add  BITS c1 c2 c              c = c1 c2 mod n^2 (decrypts to m1 + m2 mod n)
  addp BITS c1 m2 c              c = c1 g^m2 mod n^2 (decrypts to m1 + m2 mod n)
  mulk BITS c1 k c               c = c1^k mod n^2 (decrypts to k m1 mod n)
  dec  BITS c m                  m = L(c^lambda mod n^2) mu mod n
"""
import math
import random

SEED = 20240514


def is_probable_prime(x, rng, rounds=64):
    if x < 2:
        return False
    for sp in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        if x % sp == 0:
            return x == sp
    d, s = x - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for _ in range(rounds):
        a = rng.randrange(2, x - 1)
        y = pow(a, d, x)
        if y in (1, x - 1):
            continue
        for _ in range(s - 1):
            y = y * y % x
            if y == x - 1:
                break
        else:
            return False
    return True


def random_prime(bits, rng):
    while True:
        x = rng.getrandbits(bits) | (3 << (bits - 2)) | 1  # top two bits: n gets exactly 2*bits
        if is_probable_prime(x, rng):
            return x


def random_unit(n, rng):
    while True:
        r = rng.randrange(1, n)
        if math.gcd(r, n) == 1:
            return r


def main():
    rng = random.Random(SEED)
    for line in __doc__.strip().splitlines():
        print(f"# {line}".rstrip())
    for bits in (1024, 2048, 3072):
        p = random_prime(bits // 2, rng)
        q = random_prime(bits // 2, rng)
        while q == p:
            q = random_prime(bits // 2, rng)
        n = p * q
        assert n.bit_length() == bits
        n2, g = n * n, n + 1
        lam = (p - 1) * (q - 1) // math.gcd(p - 1, q - 1)
        mu = pow((pow(g, lam, n2) - 1) // n, -1, n)

        def enc(m, r):
            return pow(g, m, n2) * pow(r, n, n2) % n2

        def dec(c):
            return (pow(c, lam, n2) - 1) // n * mu % n

        print(f"key {bits} {p:x} {q:x}")
        ms = [0, 1, n - 1, rng.randrange(n), rng.randrange(n)]
        cs = []
        for m in ms:
            r = random_unit(n, rng)
            c = enc(m, r)
            assert dec(c) == m
            cs.append(c)
            print(f"enc {bits} {m:x} {r:x} {c:x}")
        c12 = cs[3] * cs[4] % n2
        assert dec(c12) == (ms[3] + ms[4]) % n
        print(f"add {bits} {cs[3]:x} {cs[4]:x} {c12:x}")
        m2 = rng.randrange(n)
        cp = cs[3] * pow(g, m2, n2) % n2
        assert dec(cp) == (ms[3] + m2) % n
        print(f"addp {bits} {cs[3]:x} {m2:x} {cp:x}")
        k = rng.randrange(1, 1 << 64)
        ck = pow(cs[4], k, n2)
        assert dec(ck) == k * ms[4] % n
        print(f"mulk {bits} {cs[4]:x} {k:x} {ck:x}")
        c_any = random_unit(n2, rng)  # any unit of Z_{n^2} is a ciphertext of something
        print(f"dec {bits} {c_any:x} {dec(c_any):x}")


if __name__ == "__main__":
    main()
