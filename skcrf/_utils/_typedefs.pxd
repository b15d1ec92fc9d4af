# C types shared by the compiled modules: cimport them from here
# (``from skcrf._utils._typedefs cimport intp``), never redefine them.

cimport numpy as cnp

# numpy's index type (np.intp): lengths, offsets, packed rows and labels
ctypedef cnp.intp_t intp
