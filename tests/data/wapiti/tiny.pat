# every kind of pattern: u, b and * ones, with and without a command, one
# given twice (its observation counts twice), Wapiti's %X, %t and %M
u:w=%x[0,0]
u:w=%x[0,0]
U:p-1/p=%x[-1,1]/%x[0,1]
u:digit=%t[0,0,"\d"]
u:suf=%M[0,0,".?.?$"]
*:p=%x[0,1]
b:p-1=%x[-1,1]
u:lower=%X[0,0]
*
b
